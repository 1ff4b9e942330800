// The real router, built whole but listening on no port: requests go in
// through fastify's inject() (no client socket, no kernel, no timing), to the
// same apps, hooks, handlers and error paths a listening router runs. The
// engines behind it stay real emulated engines on loopback.
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import OpenAI from 'openai';
import { createEnv } from '../../core/decide/env.ts';
import { fixedPolicy } from '../../core/serve/fixed-policy.ts';
import { startRouter, type Router } from '../../core/serve/server.ts';
import { EmbeddedFleet } from '../../sim/emulator/embedded-fleet.ts';
import { policyFrom } from './core.ts';
import { FULL_HEADERS_SETTINGS, type Json, TEST_KEY } from './router.ts';

export interface InjectRouter {
  router: Router;
  embedded: EmbeddedFleet;
  /** Into the public app; JSON bodies as objects, the test key unless headers say otherwise. */
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<LightMyRequestResponse>;
  /** Into the admin app. */
  admin(options: InjectOptions): Promise<LightMyRequestResponse>;
  /** The official OpenAI client, its fetch going through inject(). */
  client: OpenAI;
  close(): Promise<void>;
}

export async function buildInjectRouter(
  files: Record<string, string>,
  options: { adminToken?: string; scrapeIntervalMs?: number; healthIntervalMs?: number } = {},
): Promise<InjectRouter> {
  const withSettings = Object.keys(files).some((name) => name.includes('settings')) ? files : { ...files, 'settings.yaml': FULL_HEADERS_SETTINGS };
  const embedded = new EmbeddedFleet({ speed: 20, host: '127.0.0.1' });
  const router = await startRouter({
    policy: fixedPolicy(policyFrom(withSettings)),
    listen: false,
    logger: false,
    replicas: embedded,
    scrapeIntervalMs: options.scrapeIntervalMs ?? 50,
    healthIntervalMs: options.healthIntervalMs ?? 50,
    admin: { token: options.adminToken },
    env: createEnv({ seed: 1 }),
  });
  const admin = router.admin!;
  return {
    router,
    embedded,
    post: (path, body, headers = {}) =>
      router.app.inject({
        method: 'POST',
        url: path,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_KEY}`, ...headers },
        payload: typeof body === 'string' ? body : JSON.stringify(body),
      }),
    admin: (request) => admin.inject(request),
    client: new OpenAI({ baseURL: 'http://router.test/v1', apiKey: TEST_KEY, maxRetries: 0, fetch: injectFetch(router.app) }),
    close: () => router.close(1000),
  };
}

/** A fetch that hands the request to app.inject() and the answer back as a Response (whole, not streamed). */
export function injectFetch(app: FastifyInstance): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const url = new URL(request.url);
    const payload = request.body ? Buffer.from(await request.arrayBuffer()) : undefined;
    const answer = await app.inject({
      method: request.method as InjectOptions['method'],
      url: url.pathname + url.search,
      headers: Object.fromEntries(request.headers),
      payload,
    });
    const headers = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value !== undefined) for (const one of [value].flat()) headers.append(name, String(one));
    }
    return new Response(answer.rawPayload.length > 0 ? new Uint8Array(answer.rawPayload) : null, { status: answer.statusCode, headers });
  };
}

/** The OpenAI error body: exactly {"error":{"message","type","param","code"}}, no stack trace. */
export function errorOf(answer: LightMyRequestResponse): Json {
  const body = answer.json();
  const keys = Object.keys(body.error ?? {})
    .sort()
    .join(',');
  if (Object.keys(body).join(',') !== 'error' || keys !== 'code,message,param,type') {
    throw new Error(`not an OpenAI error body: ${answer.body.slice(0, 300)}`);
  }
  if (/\n\s+at /.test(body.error.message)) throw new Error(`a stack trace in the message: ${body.error.message}`);
  return body.error;
}
