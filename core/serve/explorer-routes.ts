// The decision explorer: a page for operators (core/serve/explorer/page.html,
// no build step) and the admin endpoints it reads: the live decision stream,
// the live policy and an explain form. Served with the other admin routes.
import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { decisionJson } from '../decide/decide.ts';
import type { DecideEnv } from '../decide/env.ts';
import { explainRequest } from '../decide/explain.ts';
import type { FleetView } from '../fleet/types.ts';
import type { DecisionStream } from '../observe/decision-stream.ts';
import type { Generation } from '../decide/generation.ts';
import { errorBody, rejection } from '../errors.ts';
import { policyView } from './policy-view.ts';
import { rejectionHeaders } from './rejections.ts';

const PAGE = new URL('./explorer/page.html', import.meta.url);
const ENDPOINTS = ['chat', 'completions', 'embeddings'];

export interface ExplorerHooks {
  readonly stream: DecisionStream;
  snapshot(): Generation;
  policyStatus(): Record<string, unknown>;
  fleet(): FleetView;
  /** A fresh environment per explain: an explained request takes no quota and moves no shared random source. */
  explainEnv(): DecideEnv;
}

type Guard = (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

function badRequest(reply: FastifyReply, requestId: string, message: string, param: string) {
  const r = rejection('invalid_request', message, { param });
  return reply.code(400).headers(rejectionHeaders(r, requestId)).send(errorBody(r));
}

export function registerExplorerRoutes(app: FastifyInstance, hooks: ExplorerHooks, guard: Guard): void {
  // Read once: the page is static. It holds no data; everything it shows
  // comes from the guarded endpoints below.
  const page = readFileSync(PAGE, 'utf8');
  app.get('/admin/explorer', async (_request, reply) =>
    reply
      .type('text/html; charset=utf-8')
      .header('cache-control', 'no-store')
      .header(
        'content-security-policy',
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
      )
      .send(page),
  );

  app.get('/admin/decisions/stream', { onRequest: guard }, async (request, reply) => {
    reply.hijack();
    if (!hooks.stream.subscribe(reply.raw)) {
      const r = { ...rejection('no_capacity', 'Too many decision streams are open; close one and retry.', { retryAfterS: 5 }), status: 503 };
      reply.raw.writeHead(503, { 'content-type': 'application/json', ...rejectionHeaders(r, request.id) });
      reply.raw.end(JSON.stringify(errorBody(r)));
    }
  });

  app.get('/admin/policy', { onRequest: guard }, async () => policyView(hooks.snapshot(), hooks.policyStatus()));

  app.post<{ Body: unknown }>('/admin/explain', { onRequest: guard }, async (request, reply) => {
    const input = request.body as { body?: unknown; headers?: unknown; endpoint?: unknown } | null | undefined;
    if (!input || typeof input !== 'object' || Array.isArray(input)) {
      return badRequest(reply, request.id, 'Send {"body": <an OpenAI request body>, "headers": {"name": "value"}}.', 'body');
    }
    if (!input.body || typeof input.body !== 'object' || Array.isArray(input.body)) {
      return badRequest(reply, request.id, '"body" must be an OpenAI request body (a JSON object with model and messages, prompt or input).', 'body');
    }
    const headers: Record<string, string> = {};
    if (input.headers !== undefined) {
      if (!input.headers || typeof input.headers !== 'object' || Array.isArray(input.headers)) {
        return badRequest(reply, request.id, '"headers" must be an object of header names to string values.', 'headers');
      }
      for (const [name, value] of Object.entries(input.headers)) {
        if (typeof value !== 'string') return badRequest(reply, request.id, `header "${name.slice(0, 64)}" must be a string.`, 'headers');
        headers[name] = value;
      }
    }
    if (input.endpoint !== undefined && !ENDPOINTS.includes(input.endpoint as string)) {
      return badRequest(reply, request.id, `"endpoint" must be one of ${ENDPOINTS.join(', ')}.`, 'endpoint');
    }
    const decision = explainRequest(
      { body: input.body, headers, endpoint: input.endpoint as 'chat' | undefined, requestId: `explain-${request.id}` },
      hooks.snapshot(),
      hooks.fleet(),
      hooks.explainEnv(),
    );
    return decisionJson(decision);
  });
}
