// Starts the real router on loopback in front of real emulated engines
// (emulate://tiny, run fast), and an official OpenAI client pointed at it.
import type { Tracer } from '@opentelemetry/api';
import OpenAI from 'openai';
import { createEnv } from '../../core/decide/env.ts';
import { fixedPolicy } from '../../core/serve/fixed-policy.ts';
import { startRouter, type ClientLimits, type Router, type RouterOptions, type ServedPolicy } from '../../core/serve/server.ts';
import { EmbeddedFleet } from '../../sim/emulator/embedded-fleet.ts';
import { policyFrom } from './core.ts';

export const TINY_MODELS = 'kind: models\nmodels:\n  - id: tiny\n    versions: [{ version: v1 }]\n';
export const TEST_KEY = 'sk-test';
/** Router tests read where a request went from the x-switchyard-* headers: opted in unless a test brings its own settings. */
export const FULL_HEADERS_SETTINGS = 'kind: settings\ndecision_headers: full\n';
export const OPEN_TENANTS =
  'kind: tenants\nanonymous: anon\ntenants:\n  - { id: anon, tier: free, api_key_sha256: [f3abf2a6cc4f00987743db5f544ba345b4899ae31f326d8ee9c4816de153c9e0] }\n';

export function tinyPool(options: { replicas?: number; strategies?: string; extra?: string; ids?: string } = {}): string {
  const n = options.replicas ?? 3;
  const replicas = Array.from({ length: n }, (_, i) => `      - { id: ${options.ids ?? 'r'}${i}, url: "emulate://tiny" }`).join('\n');
  return `kind: pools\npools:\n  - name: general\n    model: tiny\n    version: v1\n    limits: { max_model_len: 1024 }\n    strategies: ${options.strategies ?? '[session-affinity, power-of-two]'}\n${options.extra ?? ''}    replicas:\n${replicas}\n`;
}

/**
 * The real router over policy files whose replicas are engines the test started
 * itself (real URLs), with fast scrapes and checks and a seeded environment.
 */
export function startRouterOver(files: Record<string, string>, seed: number): Promise<Router> {
  return startRouter({
    policy: fixedPolicy(policyFrom(files)),
    port: 0,
    logger: false,
    scrapeIntervalMs: 30,
    healthIntervalMs: 30,
    admin: { port: 0 },
    env: createEnv({ seed }),
  });
}

export interface TestRouter {
  router: Router;
  /** The emulated engines behind the router's emulate:// replicas. */
  embedded: EmbeddedFleet;
  client: OpenAI;
  url: string;
  /** The admin listener (loopback, a free port): /admin/*, probes, /metrics. */
  adminUrl: string;
  close(): Promise<void>;
}

export async function startTestRouter(
  files: Record<string, string>,
  options: { speed?: number; policy?: ServedPolicy; adminToken?: string; apiKey?: string; tracer?: Tracer; limits?: Partial<ClientLimits> } & Pick<
    RouterOptions,
    'shadow' | 'recorder' | 'logger' | 'kvIndex'
  > = {},
): Promise<TestRouter> {
  const withSettings = Object.keys(files).some((name) => name.includes('settings')) ? files : { ...files, 'settings.yaml': FULL_HEADERS_SETTINGS };
  const policy = options.policy ?? fixedPolicy(policyFrom(withSettings));
  const embedded = new EmbeddedFleet({ speed: options.speed ?? 20, host: '127.0.0.1' });
  const router = await startRouter({
    policy,
    port: 0,
    logger: options.logger ?? false,
    replicas: embedded,
    scrapeIntervalMs: 50,
    healthIntervalMs: 50,
    admin: { port: 0, token: options.adminToken },
    env: createEnv({ seed: 1 }),
    tracer: options.tracer,
    limits: options.limits,
    shadow: options.shadow,
    recorder: options.recorder,
    kvIndex: options.kvIndex,
  });
  const client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: options.apiKey ?? TEST_KEY, maxRetries: 0, timeout: 20_000 });
  return { router, embedded, client, url: router.url, adminUrl: router.adminUrl!, close: () => router.close(1000) };
}

export async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 5000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Untyped JSON (a response body, a parsed manifest): tests assert on its shape, field by field. */
// biome-ignore lint/suspicious/noExplicitAny: the one untyped-JSON type of the tests; an assertion reads any field
export type Json = any;

/** A response body as JSON, untyped: tests assert on its shape. */
export const json = (response: Response): Promise<Json> => response.json();
