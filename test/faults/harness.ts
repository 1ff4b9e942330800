// The real router on loopback in front of fault engines: one pool, the
// replicas in policy order, round-robin, and timeouts short enough for a test
// (the defaults are for real engines: docs/reliability.md).
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { OPEN_TENANTS, startTestRouter, TINY_MODELS, type TestRouter } from '../helpers/router.ts';
import { FaultEngine } from './fault-engine.ts';

const TEST_TIMEOUTS = { connect_timeout_ms: 500, stream_headers_timeout_ms: 400, headers_timeout_ms: 700, stream_idle_timeout_ms: 400, body_timeout_ms: 400 };

export interface FaultFleet {
  readonly t: TestRouter;
  readonly engines: Map<string, FaultEngine>;
  engine(name: string): FaultEngine;
  /** Engines the request reached, by name. */
  reached(requestId: string): string[];
  close(): Promise<void>;
}

export interface FleetOptions {
  /** Extra pool settings, one YAML line each (`retries: {...}`). */
  readonly settings?: string[];
  /** Timeouts over the test's short ones. */
  readonly upstream?: Partial<typeof TEST_TIMEOUTS>;
  /** Replica names whose URL refuses connections (nothing listens there). */
  readonly refusing?: string[];
  /** Client bounds over the settings' (short send timeouts). */
  readonly limits?: NonNullable<Parameters<typeof startTestRouter>[1]>['limits'];
}

/** Engines named `names` (all healthy to start with), behind a router. */
export async function faultFleet(names: string[], options: FleetOptions = {}): Promise<FaultFleet> {
  const engines = new Map<string, FaultEngine>();
  const urls = new Map<string, string>();
  for (const name of names) {
    if (options.refusing?.includes(name)) {
      urls.set(name, await refusingUrl());
      continue;
    }
    const engine = new FaultEngine(name);
    engines.set(name, engine);
    urls.set(name, await engine.start());
  }
  const upstream = `upstream: ${JSON.stringify({ ...TEST_TIMEOUTS, ...options.upstream })}`;
  const settings = [upstream, ...(options.settings ?? [])].map((line) => `    ${line}\n`).join('');
  const replicas = names.map((name) => `      - { id: ${name}, url: "${urls.get(name)}" }`).join('\n');
  const pools = `kind: pools\npools:\n  - name: general\n    model: tiny\n    version: v1\n    strategies: [round-robin]\n${settings}    replicas:\n${replicas}\n`;
  let t: TestRouter;
  try {
    t = await startTestRouter({ 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': pools }, { limits: options.limits });
  } catch (error) {
    await Promise.all([...engines.values()].map((e) => e.stop())); // or they keep the test process alive
    throw error;
  }
  return {
    t,
    engines,
    engine: (name) => engines.get(name)!,
    reached: (requestId) => [...engines.values()].filter((e) => e.hits(requestId) > 0).map((e) => e.name),
    async close() {
      await t.close();
      await Promise.all([...engines.values()].map((e) => e.stop()));
    },
  };
}

/** A loopback URL with nothing listening: connections are refused. */
async function refusingUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

let ids = 0;
/** A request id no other request of the run has. */
export const requestId = (label: string) => `${label}-${process.pid}-${ids++}`;
