// npm run bench:decide — µs per routing decision (p50, p99) for the example
// policy, its general 8B pool scaled to 8, 64 and 512 replicas, over a mix of
// requests (cascade, conversations, shared system prompts, LoRA, batch), with
// the fleet standing still and with it moving as under traffic.
import { readFileSync } from 'node:fs';
import { commit } from '../core/decide/commit.ts';
import { decide } from '../core/decide/decide.ts';
import { createEnv } from '../core/decide/env.ts';
import { MemoryQuotaStore, type QuotaCost } from '../core/decide/quota.ts';
import { requestFacts } from '../core/facts/request-facts.ts';
import { ChangeLog } from '../core/fleet/change-log.ts';
import type { FleetView, ReplicaState } from '../core/fleet/types.ts';
import { buildSnapshot } from '../core/decide/load.ts';
import { policyInputsFromTexts } from '../core/policy/inputs.ts';
import { seededRandom } from '../sdk/index.ts';
import { formatProblem } from '../core/diagnostics/problem.ts';
import { registryOf } from '../core/plugins/registry.ts';
import { BUILTIN_STRATEGIES } from '../plugins/index.ts';

const dir = new URL('../policies/', import.meta.url);
const files = Object.fromEntries(
  ['models.yaml', 'pools.yaml', 'rules.yaml', 'settings.yaml', 'tenants.yaml'].map((f) => [f, readFileSync(new URL(f, dir), 'utf8')]),
);

function policyWith(replicas: number) {
  const general = /( {4}replicas:\n)((?: {6}- \{ id: l8-general-.*\n)+)/;
  const lines = Array.from(
    { length: replicas },
    (_, i) => `      - { id: l8-general-${i}, url: "http://127.0.0.1:${10000 + i}"${i === 0 ? ', adapters: [team-x-v3]' : ''} }\n`,
  ).join('');
  const pools = files['pools.yaml'].replace(general, (_m, head) => head + lines);
  const result = buildSnapshot(policyInputsFromTexts({ ...files, 'pools.yaml': pools }, { registry: registryOf(BUILTIN_STRATEGIES) }), { seed: 1 });
  if (!result.snapshot) throw new Error(result.problems.map(formatProblem).join('\n'));
  return result.snapshot;
}

const system = 'You are a helpful assistant for ACME Corp. Answer briefly and cite sources. '.repeat(12);
const requests = Array.from({ length: 2000 }, (_, i) => {
  const kind = i % 5;
  const headers: Record<string, string> = {};
  if (kind !== 4) headers['x-conversation-id'] = `conv-${i % 300}`;
  if (kind === 3) headers.authorization = 'Bearer sk-demo-lora';
  const model = kind === 0 ? 'auto' : 'chat-small';
  const messages = [
    { role: 'system', content: system },
    { role: 'user', content: kind === 0 && i % 2 ? '```js\nconst a = 1;\n```' : `Question number ${i}: what happens next in the story?` },
  ];
  return { endpoint: 'chat' as const, headers, body: { model, messages, max_tokens: 128 } };
});

/**
 * A fleet as the router's live one behaves: a new frozen state object for
 * every change, each change recorded in the fleet's change feed.
 */
class BenchFleet implements FleetView {
  readonly changes = new ChangeLog();
  private readonly states = new Map<string, ReplicaState>();

  replica(id: string): ReplicaState | undefined {
    return this.states.get(id);
  }

  set(id: string, state: ReplicaState): void {
    this.states.set(id, Object.freeze(state));
    this.changes.record(id);
  }
}

/**
 * `live`: the fleet moves as it does under traffic: every admitted request
 * raises its replica's in-flight count until 64 requests later, a replica is
 * scraped every 10 requests (each in turn), and the clock advances 0.2 ms a
 * request (5,000 requests a second). Otherwise the fleet stands still, as in
 * the previous releases' bench.
 */
function run(replicas: number, live: boolean) {
  const snapshot = policyWith(replicas);
  const random = seededRandom(3);
  const fleet = new BenchFleet();
  let now = 1_000_000;
  const ids = [...snapshot.replicas.keys()];
  const scrape = (id: string) => {
    const inFlight = fleet.replica(id)?.inFlight ?? Math.floor(random() * 8);
    fleet.set(id, {
      health: 'ready',
      kvUsage: random() * 0.9,
      queueDepth: Math.floor(random() * 4),
      running: Math.floor(random() * 64),
      inFlight,
      scrapedAt: now - 500,
      loadedAdapters: [],
    });
  };
  for (const id of ids) scrape(id);
  const adjust = (id: string, by: number) => {
    const state = fleet.replica(id)!;
    fleet.set(id, { ...state, inFlight: state.inFlight + by });
  };
  // Quota is checked and taken as usual, but the bench's thousands of requests
  // a second would exhaust the demo tenants' per-minute limits.
  const quota = new MemoryQuotaStore();
  const unlimited = { check: (t: string, c: QuotaCost) => quota.check(t, c, {}, now), take: (t: string, c: QuotaCost) => quota.take(t, c, {}, now) };
  const env = createEnv({ now: () => now, quota: unlimited });
  const iterations = 20_000;
  const samples = new Float64Array(iterations);
  const inFlight: string[] = [];
  let admitted = 0;
  for (let i = 0; i < iterations + 2000; i++) {
    const input = requests[i % requests.length];
    const started = process.hrtime.bigint();
    const facts = requestFacts({ requestId: `b${i}`, ...input });
    const decision = decide(facts, snapshot, fleet, env);
    commit(decision, env); // as the router does: quota taken, strategies told (prefix-affinity remembers)
    const elapsed = Number(process.hrtime.bigint() - started) / 1000;
    if (i >= 2000) {
      samples[i - 2000] = elapsed; // the first 2,000 warm up the JIT
      if (decision.ok) admitted++;
    }
    if (!live) continue;
    now += 0.2;
    if (decision.ok) {
      adjust(decision.value.replica, 1);
      inFlight.push(decision.value.replica);
      if (inFlight.length > 64) adjust(inFlight.shift()!, -1);
    }
    if (i % 10 === 0) scrape(ids[(i / 10) % ids.length]);
  }
  samples.sort();
  const pct = (p: number) => samples[Math.min(iterations - 1, Math.floor(iterations * p))];
  const mean = samples.reduce((a, b) => a + b, 0) / iterations;
  return { replicas: snapshot.replicas.size, general: replicas, p50: pct(0.5), p99: pct(0.99), mean, admitted: admitted / iterations };
}

console.log('decide() + commit(): request facts, the four decisions and what they set off, µs per request (one process, one core)');
console.log('fleet  | general-pool replicas | fleet replicas |   p50 µs |   p99 µs |  mean µs | admitted');
// BENCH_REPLICAS=512 (comma-separated) runs only those pool sizes.
const sizes = process.env.BENCH_REPLICAS ? process.env.BENCH_REPLICAS.split(',').map(Number) : [8, 64, 512];
// A first run, not shown: a fresh process's JIT is still settling well past one run's warm-up.
run(64, true);
for (const live of [false, true]) {
  for (const n of sizes) {
    const r = run(n, live);
    console.log(
      `${(live ? 'live' : 'still').padEnd(6)} | ${String(r.general).padStart(21)} | ${String(r.replicas).padStart(14)} | ${r.p50.toFixed(1).padStart(8)} | ${r.p99.toFixed(1).padStart(8)} | ${r.mean.toFixed(1).padStart(8)} | ${(r.admitted * 100).toFixed(0)}%`,
    );
  }
}
