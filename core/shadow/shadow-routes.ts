// The shadow policy's admin routes (admin listener only, behind its token):
//   GET    /admin/shadow            the rolling summary (and the recorder's state)
//   GET    /admin/shadow/decisions  the newest differing decisions side by side (?limit=1..100), for the explorer
//   PUT    /admin/shadow            {"dir": "candidate-policies"}: load, validate and watch a shadow policy
//   DELETE /admin/shadow            turn the shadow off
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { errorBody, rejection } from '../errors.ts';
import type { TrafficRecorder } from './recorder.ts';
import type { Shadow } from './shadow.ts';

const MAX_SAMPLES = 100;

function badRequest(reply: FastifyReply, message: string, param: string) {
  return reply.code(400).send(errorBody(rejection('invalid_request', message, { param })));
}

export function registerShadowRoutes(app: FastifyInstance, shadow: Shadow, guard: onRequestHookHandler, recorder?: TrafficRecorder): void {
  app.get('/admin/shadow', { onRequest: guard }, async () => ({ ...shadow.summary(), recording: recorder?.status() ?? null }));

  app.get<{ Querystring: Record<string, string | string[]> }>(
    '/admin/shadow/decisions',
    { onRequest: guard },
    async (request: FastifyRequest<{ Querystring: Record<string, string | string[]> }>, reply) => {
      const names = Object.keys(request.query);
      const unknown = names.find((name) => name !== 'limit');
      if (unknown) return badRequest(reply, `Unknown query parameter "${unknown.slice(0, 40)}"; use limit.`, unknown.slice(0, 40));
      const text = request.query.limit;
      let limit = 20;
      if (text !== undefined) {
        limit = typeof text === 'string' && /^\d{1,4}$/.test(text) ? Number(text) : NaN;
        if (!(limit >= 1 && limit <= MAX_SAMPLES)) return badRequest(reply, `"limit" must be a whole number from 1 to ${MAX_SAMPLES}.`, 'limit');
      }
      return { state: shadow.dir ? 'on' : 'off', decisions: shadow.samples(limit).map((s) => ({ ...s, at: new Date(s.at).toISOString() })) };
    },
  );

  app.put<{ Body: unknown }>('/admin/shadow', { onRequest: guard }, async (request, reply) => {
    const body = request.body as { dir?: unknown } | undefined;
    const fields = body && typeof body === 'object' && !Array.isArray(body) ? Object.keys(body) : undefined;
    if (!fields || fields.length !== 1 || typeof body!.dir !== 'string' || body!.dir.length === 0 || body!.dir.length > 4096 || body!.dir.includes('\0')) {
      return badRequest(
        reply,
        'The body must be {"dir": "PATH"}: the shadow policy directory, as the router process sees it. DELETE /admin/shadow turns the shadow off.',
        'dir',
      );
    }
    return shadow.set(body!.dir);
  });

  app.delete('/admin/shadow', { onRequest: guard }, async () => {
    await shadow.clear();
    return { state: 'off' };
  });
}
