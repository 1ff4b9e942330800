// npm run bench:quota — what a tenant quota costs when it is shared through
// Redis, in one run against the in-memory store:
//  1. the store alone: added latency per admission (the bounded wait before
//     decide() plus check and take), three stores (routers) on one Redis,
//     32 admissions at a time, for one Redis round trip per admission
//     (lease_fraction 0) and for leases (lease_fraction 0.01);
//  2. the router: latency p50/p99, CPU µs per request and RSS at a fixed
//     request rate, per quota store (the figures docs/deploy.md sizes from).
import { fork, type ChildProcess } from 'node:child_process';
import { Pool } from 'undici';
import { MemoryQuotaStore, type QuotaStore } from '../core/decide/quota.ts';
import { RedisQuotaStore } from '../core/quota/redis-quota-store.ts';
import { QUOTA_WAIT_ROUNDS } from '../core/quota/wait.ts';
import { startRedis } from '../test/helpers/redis.ts';

const ADMISSIONS = Number(process.env.BENCH_ADMISSIONS ?? 30_000);
const RATE = Number(process.env.BENCH_RATE ?? 300);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const here = new URL('.', import.meta.url).pathname;
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN;
const quiet = { info: () => {}, warn: (m: string) => console.error(m) };

const redis = await startRedis();

// 1. The store alone.
async function admissions(stores: QuotaStore[]): Promise<{ micros: number[]; admitted: number }> {
  // 1,000 requests a second per tenant: never reached in a run, and a 1% lease is 600 requests.
  const limits = { requestsPerMinute: 60_000, tokensPerMinute: 18_000_000 };
  const cost = { requests: 1, tokens: 300 };
  const micros: number[] = [];
  let admitted = 0;
  let next = 0;
  const worker = async () => {
    while (next < ADMISSIONS) {
      const i = next++;
      const store = stores[i % stores.length];
      const tenant = `tenant-${i % 20}`;
      const started = performance.now();
      for (let round = 0, wait = store.prepare?.(tenant, cost, limits, Date.now()); wait && round < QUOTA_WAIT_ROUNDS; round++) {
        await wait;
        wait = store.prepare?.(tenant, cost, limits, Date.now());
      }
      const now = Date.now();
      if (store.check(tenant, cost, limits, now).ok) {
        store.take(tenant, cost, limits, now);
        admitted++;
      }
      micros.push((performance.now() - started) * 1000);
      // Let other arrivals in, as requests on a server would.
      await new Promise(setImmediate);
    }
  };
  await Promise.all(Array.from({ length: 32 }, worker));
  return { micros: micros.sort((a, b) => a - b), admitted };
}

const redisStores = async (leaseFraction: number) =>
  Promise.all(
    [0, 1, 2].map(() =>
      RedisQuotaStore.open(
        // A generous timeout: this measures Redis, not the fail-open path.
        {
          url: redis.url,
          keyPrefix: `bench${leaseFraction}:`,
          timeoutMs: 1000,
          onUnavailable: 'fail_open',
          expectedRouters: 3,
          leaseFraction,
          leaseIdleMs: 2000,
        },
        quiet,
      ),
    ),
  );

console.log(`bench:quota — 1. the quota store alone: ${ADMISSIONS} admissions, 3 stores (routers), 20 tenants, 32 at a time, one loopback redis-server`);
console.log('store                          | added p50 µs | p99 µs | p99.9 µs | admitted | Redis calls | failures');
const storeRows: [string, () => Promise<QuotaStore[]>][] = [
  ['in memory (one router)', async () => [new MemoryQuotaStore()]],
  ['Redis, a round trip each', () => redisStores(0)],
  ['Redis, leases of 1% a minute', () => redisStores(0.01)],
];
for (const [name, make] of storeRows) {
  const stores = await make();
  await admissions(stores); // warm up
  let calls = 0;
  let failures = 0;
  for (const store of stores) store.observe?.({ failure: () => failures++, up: () => {}, fetched: () => calls++ });
  const { micros, admitted } = await admissions(stores);
  console.log(
    `${name.padEnd(30)} | ${pct(micros, 0.5).toFixed(1).padStart(12)} | ${pct(micros, 0.99).toFixed(1).padStart(6)} | ${pct(micros, 0.999).toFixed(1).padStart(8)} | ${String(admitted).padStart(8)} | ${String(calls).padStart(11)} | ${failures}`,
  );
  for (const store of stores) await (store as { close?: () => Promise<void> }).close?.();
}

// 2. The router.
function start(script: string, args: string[]): Promise<{ url: string; child: ChildProcess }> {
  const child = fork(script, args, { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('message', (m) => resolve({ url: (m as { url: string }).url, child }));
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
}
/** Asks the router process for its CPU time or RSS; replies are told apart by their key. */
const ask = <T>(child: ChildProcess, what: 'cpu' | 'rss'): Promise<T> =>
  new Promise((resolve) => {
    const key = what === 'cpu' ? 'cpuMicros' : 'rss';
    const listener = (m: unknown) => {
      if (m && typeof m === 'object' && key in m) {
        child.off('message', listener);
        resolve(m as T);
      }
    };
    child.on('message', listener);
    child.send(what);
  });

const body = (i: number) =>
  JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: `Question ${i}: summarise the plot of a novel in one line.` }], max_tokens: 16 });

async function load(url: string, child: ChildProcess): Promise<{ latencies: number[]; errors: number; cpu: number; rss: number }> {
  const pool = new Pool(url, { connections: 128 });
  const latencies: number[] = [];
  let errors = 0;
  let rss = 0;
  const total = RATE * SECONDS;
  const before = await ask<{ cpuMicros: number }>(child, 'cpu');
  const sampler = setInterval(() => void ask<{ rss: number }>(child, 'rss').then((m) => (rss = Math.max(rss, m.rss))), 250);
  const started = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const wait = started + (i * 1000) / RATE - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const sent = performance.now();
    inFlight.push(
      pool
        .request({
          path: '/v1/chat/completions',
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-conversation-id': `c-${i % 50}` },
          body: body(i),
        })
        .then(async (response) => {
          await response.body.text();
          if (response.statusCode === 200) latencies.push(performance.now() - sent);
          else if (errors++ === 0) console.error(`first error: ${response.statusCode}`);
        })
        .catch(() => void errors++),
    );
  }
  await Promise.all(inFlight);
  clearInterval(sampler);
  const after = await ask<{ cpuMicros: number }>(child, 'cpu');
  await pool.close();
  return { latencies: latencies.sort((a, b) => a - b), errors, cpu: (after.cpuMicros - before.cpuMicros) / total, rss };
}

const engine = await start(`${here}targets/engine.ts`, []);
const variants: [string, string, number][] = [
  ['in memory', '-', 0.01],
  ['Redis, a round trip each', redis.url, 0],
  ['Redis, leases of 1%', redis.url, 0.01],
];
console.log(`\n2. one router process, ${RATE} req/s for ${SECONDS} s (open loop), one emulated engine, 16 output tokens; quota enforced but never reached`);
console.log('quota store              | latency p50 ms | p99 ms | vs memory p50 | p99     | CPU µs/req | peak RSS MiB | errors');
let memory: { p50: number; p99: number } | undefined;
for (const [name, url, fraction] of variants) {
  const router = await start(`${here}targets/quota-router.ts`, [engine.url, url, String(fraction)]);
  await load(router.url, router.child); // warm up
  const run = await load(router.url, router.child);
  const p50 = pct(run.latencies, 0.5);
  const p99 = pct(run.latencies, 0.99);
  memory ??= { p50, p99 };
  console.log(
    `${name.padEnd(24)} | ${p50.toFixed(2).padStart(14)} | ${p99.toFixed(2).padStart(6)} | ${(p50 / memory.p50).toFixed(2).padStart(12)}× | ${(p99 / memory.p99).toFixed(2).padStart(6)}× | ${run.cpu.toFixed(0).padStart(10)} | ${(run.rss / 2 ** 20).toFixed(0).padStart(12)} | ${run.errors}`,
  );
  router.child.kill();
}
engine.child.kill();
await redis.stop();
process.exit(0);
