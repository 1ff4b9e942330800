// Operators' endpoints: recent decisions, router state, reload, draining,
// health and metrics. Admin routes need `Authorization: Bearer
// $SWITCHYARD_ADMIN_TOKEN` when that is set, and only loopback clients
// otherwise.
import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorBody, rejection } from '../errors.ts';
import { rejectionHeaders } from './rejections.ts';

export interface AdminHooks {
  state(): Record<string, unknown>;
  decisions(limit: number): unknown[];
  reload(): Promise<Record<string, unknown>>;
  setDraining(replica: string, draining: boolean): boolean;
  metrics(): Promise<{ contentType: string; body: string }>;
  ready(): boolean;
}

const isLoopback = (address: string | undefined) => !!address && (address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.'));

export function adminGuard(token: string | undefined) {
  const expected = token ? Buffer.from(`Bearer ${token}`) : undefined;
  return async (request: FastifyRequest, reply: FastifyReply) => {
    let allowed: boolean;
    if (expected) {
      const given = Buffer.from(request.headers.authorization ?? '');
      allowed = given.length === expected.length && timingSafeEqual(given, expected);
    } else {
      allowed = isLoopback(request.socket.remoteAddress);
    }
    if (!allowed) {
      const r = { ...rejection('invalid_api_key', expected ? 'Admin routes need "Authorization: Bearer $SWITCHYARD_ADMIN_TOKEN".' : 'Admin routes answer loopback clients only; set SWITCHYARD_ADMIN_TOKEN to allow others.'), status: 403, type: 'permission_error' };
      return reply.code(403).headers(rejectionHeaders(r, request.id)).send(errorBody(r));
    }
  };
}

export function registerAdminRoutes(app: FastifyInstance, hooks: AdminHooks, token: string | undefined): void {
  const guard = adminGuard(token);
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => (hooks.ready() ? { status: 'ready' } : reply.code(503).send({ status: 'not ready' })));
  app.get('/metrics', async (_request, reply) => {
    const { contentType, body } = await hooks.metrics();
    return reply.type(contentType).send(body);
  });
  app.get('/admin/state', { onRequest: guard }, async () => hooks.state());
  app.get<{ Querystring: { limit?: string } }>('/admin/decisions', { onRequest: guard }, async (request) => {
    const limit = Math.max(1, Math.min(1000, Number(request.query.limit ?? 50) || 50));
    return { decisions: hooks.decisions(limit) };
  });
  app.post('/admin/reload', { onRequest: guard }, async () => hooks.reload());
  app.post<{ Params: { id: string }; Body: { draining?: boolean } | undefined }>('/admin/replicas/:id/drain', { onRequest: guard }, async (request, reply) => {
    const draining = request.body?.draining ?? true;
    if (!hooks.setDraining(request.params.id, draining)) {
      const r = { ...rejection('invalid_request', `No replica "${request.params.id}".`), status: 404 };
      return reply.code(404).headers(rejectionHeaders(r, request.id)).send(errorBody(r));
    }
    return { replica: request.params.id, draining };
  });
}
