// The routes vLLM serves besides chat, completions and embeddings, each
// decided like them (facts, the four decisions, a trace) and forwarded to
// the same path on the chosen engine (docs/serving.md lists them).
import type { FastifyInstance, onRequestHookHandler } from 'fastify';
import { BODY_SCHEMAS, type Endpoint } from '../facts/request-schemas.ts';
import { anthropicErrorHandler } from './anthropic-errors.ts';
import { registerMultipartParser } from './multipart-body.ts';
import { proxyHandler, type ProxyDeps } from './proxy.ts';
import { recordRefusal } from './refusals.ts';
import { ANTHROPIC_ROUTE, MULTIPART_ROUTE, OPENAI_ROUTE, RESPONSES_ROUTE, type RouteShape } from './route-shapes.ts';

const JSON_ROUTES: readonly (readonly [path: string, endpoint: Endpoint, shape: RouteShape])[] = [
  ['/v1/responses', 'responses', RESPONSES_ROUTE],
  ['/v1/messages', 'messages', ANTHROPIC_ROUTE],
  ['/tokenize', 'tokenize', OPENAI_ROUTE],
  ['/detokenize', 'detokenize', OPENAI_ROUTE],
  ['/v1/rerank', 'rerank', OPENAI_ROUTE],
  ['/rerank', 'rerank', OPENAI_ROUTE],
  ['/v2/rerank', 'rerank', OPENAI_ROUTE],
  ['/v1/score', 'score', OPENAI_ROUTE],
  ['/score', 'score', OPENAI_ROUTE],
  ['/pooling', 'pooling', OPENAI_ROUTE],
  ['/classify', 'classify', OPENAI_ROUTE],
  ['/v1/classify', 'classify', OPENAI_ROUTE],
];

const AUDIO_ROUTES: readonly (readonly [path: string, endpoint: Endpoint])[] = [
  ['/v1/audio/transcriptions', 'transcriptions'],
  ['/v1/audio/translations', 'translations'],
];

/** Every route path the public listener proxies, for the 404's list. */
export const VLLM_ROUTE_PATHS: readonly string[] = [...JSON_ROUTES.map(([path]) => path), ...AUDIO_ROUTES.map(([path]) => path)];

/** `early`: the checks every proxied route runs on the head, before its body is read. */
export function registerVllmRoutes(app: FastifyInstance, deps: ProxyDeps, audioBodyLimit: number, early?: onRequestHookHandler): void {
  const anthropicErrors = anthropicErrorHandler((request, r) => recordRefusal(deps, request, r));
  for (const [path, endpoint, shape] of JSON_ROUTES) {
    const errorHandler = shape === ANTHROPIC_ROUTE ? anthropicErrors : undefined;
    app.post(
      path,
      { ...(early ? { onRequest: early } : {}), schema: { body: BODY_SCHEMAS[endpoint] }, ...(errorHandler ? { errorHandler } : {}) },
      proxyHandler(deps, endpoint, path, shape),
    );
  }
  registerMultipartParser(app, audioBodyLimit);
  for (const [path, endpoint] of AUDIO_ROUTES) {
    app.post(
      path,
      { ...(early ? { onRequest: early } : {}), bodyLimit: audioBodyLimit, schema: { body: BODY_SCHEMAS[endpoint] } },
      proxyHandler(deps, endpoint, path, MULTIPART_ROUTE),
    );
  }
}
