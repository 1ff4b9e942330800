// Operators' endpoints. Probes (/healthz, /readyz) are served on both
// listeners; /metrics and /admin/* only on the admin listener (admin-listener.ts),
// never on the public one. With SWITCHYARD_ADMIN_TOKEN set, /admin/* needs
// `Authorization: Bearer $SWITCHYARD_ADMIN_TOKEN`.
import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorBody, rejection } from '../errors.ts';
import { requireNonSimple } from './admin-origin.ts';
import { rejectionHeaders } from './rejections.ts';

export interface AdminHooks {
  state(): Record<string, unknown>;
  /** Each replica's recent load and hit rate (core/fleet/replica-history.ts). */
  history?(): Record<string, unknown>;
  /** The newest decisions first, at most `limit`. */
  decisions(limit: number): Record<string, unknown>[];
  reload(): Promise<Record<string, unknown>>;
  setDraining(replica: string, draining: boolean): boolean;
  metrics(): Promise<{ contentType: string; body: string }>;
  ready(): boolean;
}

const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 1000;
/** Request ids the router accepts from clients (server.ts) are at most 128 printable characters. */
const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

function reject(reply: FastifyReply, request: FastifyRequest, status: 400 | 403 | 404, message: string, param?: string) {
  const base =
    status === 403
      ? rejection('invalid_api_key', message)
      : status === 404
        ? rejection('route_not_found', message)
        : rejection('invalid_request', message, { param });
  const r = status === 403 ? { ...base, status: 403, type: 'permission_error' } : base;
  return reply.code(status).headers(rejectionHeaders(r, request.id)).send(errorBody(r));
}

export function adminGuard(token: string | undefined) {
  const expected = token ? Buffer.from(`Bearer ${token}`) : undefined;
  return async (request: FastifyRequest, reply: FastifyReply) => {
    if (!expected) return;
    const given = Buffer.from(request.headers.authorization ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return reject(reply, request, 403, 'Admin routes need "Authorization: Bearer $SWITCHYARD_ADMIN_TOKEN".');
    }
  };
}

/** /healthz and /readyz for probes, and (given `metrics`) /metrics for Prometheus: read-only, no request content. */
export function registerProbeRoutes(app: FastifyInstance, hooks: Pick<AdminHooks, 'ready'> & Partial<Pick<AdminHooks, 'metrics'>>): void {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => (hooks.ready() ? { status: 'ready' } : reply.code(503).send({ status: 'not ready' })));
  if (!hooks.metrics) return;
  const metrics = hooks.metrics;
  app.get('/metrics', async (_request, reply) => {
    const { contentType, body } = await metrics();
    return reply.type(contentType).send(body);
  });
}

export function registerAdminRoutes(app: FastifyInstance, hooks: AdminHooks, token: string | undefined): void {
  const guard = adminGuard(token);
  app.get('/admin/state', { onRequest: guard }, async () => hooks.state());
  app.get('/admin/fleet/history', { onRequest: guard }, async () => hooks.history?.() ?? { replicas: [] });

  app.get<{ Querystring: Record<string, string | string[]> }>('/admin/decisions', { onRequest: guard }, async (request, reply) => {
    const query = request.query;
    for (const name of Object.keys(query)) {
      if (name !== 'limit' && name !== 'requestId') return reject(reply, request, 400, `Unknown query parameter "${name}"; use limit and requestId.`, name);
      if (typeof query[name] !== 'string') return reject(reply, request, 400, `Query parameter "${name}" given more than once.`, name);
    }
    const limitText = query.limit as string | undefined;
    let limit = DEFAULT_LIMIT;
    if (limitText !== undefined) {
      limit = /^\d{1,7}$/.test(limitText) ? Number(limitText) : NaN;
      if (!(limit >= 1 && limit <= MAX_LIMIT))
        return reject(reply, request, 400, `"limit" must be a whole number from 1 to ${MAX_LIMIT}, not ${JSON.stringify(limitText.slice(0, 40))}.`, 'limit');
    }
    const requestId = query.requestId as string | undefined;
    if (requestId === undefined) return { decisions: hooks.decisions(limit) };
    if (!REQUEST_ID.test(requestId)) return reject(reply, request, 400, '"requestId" must be 1 to 128 printable characters.', 'requestId');
    return {
      decisions: hooks
        .decisions(MAX_LIMIT)
        .filter((d) => d.requestId === requestId)
        .slice(0, limit),
    };
  });

  app.get<{ Params: { requestId: string } }>('/admin/decisions/:requestId', { onRequest: guard }, async (request, reply) => {
    const id = request.params.requestId;
    if (!REQUEST_ID.test(id)) return reject(reply, request, 400, '"requestId" must be 1 to 128 printable characters.', 'requestId');
    const found = hooks.decisions(MAX_LIMIT).find((d) => d.requestId === id);
    if (!found) return reject(reply, request, 404, `No decision for request "${id}" among the ${MAX_LIMIT} most recent.`);
    return found;
  });

  // State changes: never from a cross-site form (admin-origin.ts).
  app.post('/admin/reload', { onRequest: [guard, requireNonSimple] }, async () => hooks.reload());

  app.post<{ Params: { id: string }; Body: unknown }>('/admin/replicas/:id/drain', { onRequest: [guard, requireNonSimple] }, async (request, reply) => {
    // No body drains; a body is exactly {"draining": true|false}: "no" is not false.
    const body = request.body;
    let draining = true;
    if (body !== undefined && body !== null) {
      const fields = typeof body === 'object' && !Array.isArray(body) ? Object.keys(body) : undefined;
      const value = (body as { draining?: unknown }).draining;
      if (!fields || fields.some((f) => f !== 'draining') || (fields.length === 1 && typeof value !== 'boolean')) {
        return reject(reply, request, 400, 'The body must be {"draining": true} or {"draining": false}.', 'draining');
      }
      if (typeof value === 'boolean') draining = value;
    }
    if (!hooks.setDraining(request.params.id, draining)) return reject(reply, request, 404, `No replica "${request.params.id}".`);
    return { replica: request.params.id, draining };
  });
}
