// npm run bench:decide — µs per routing decision (p50, p99) for the example
// policy, its general 8B pool scaled to 8, 64 and 512 replicas, over a mix of
// requests (cascade, conversations, shared system prompts, LoRA, batch), with
// the fleet standing still and with it moving as under traffic. Every
// configuration is set up at once and they run in turn, batch by batch, so
// that the machine's load falls alike on all; the p50 is printed with the
// spread of its BENCH_ROUNDS (3) consecutive parts. BENCH_BASELINE=DIR runs
// another checkout's decide() (with its own node_modules) among them, and
// prints the ratios: on the shared machine, only a ratio from one process is
// a figure.
import { readFileSync } from 'node:fs';
import { commit } from '../core/decide/commit.ts';
import { decide, type Decision, type DecideOptions } from '../core/decide/decide.ts';
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

/** What a run calls: this checkout's modules, or the baseline's (BENCH_BASELINE). */
interface Tree {
  commit: typeof commit;
  decide: typeof decide;
  createEnv: typeof createEnv;
  MemoryQuotaStore: typeof MemoryQuotaStore;
  requestFacts: typeof requestFacts;
  ChangeLog: typeof ChangeLog;
  buildSnapshot: typeof buildSnapshot;
  policyInputsFromTexts: typeof policyInputsFromTexts;
  seededRandom: typeof seededRandom;
  formatProblem: typeof formatProblem;
  registryOf: typeof registryOf;
  BUILTIN_STRATEGIES: typeof BUILTIN_STRATEGIES;
}
const here: Tree = {
  commit,
  decide,
  createEnv,
  MemoryQuotaStore,
  requestFacts,
  ChangeLog,
  buildSnapshot,
  policyInputsFromTexts,
  seededRandom,
  formatProblem,
  registryOf,
  BUILTIN_STRATEGIES,
};

async function treeAt(dir: string): Promise<Tree> {
  const paths = [
    'core/decide/commit.ts',
    'core/decide/decide.ts',
    'core/decide/env.ts',
    'core/decide/quota.ts',
    'core/facts/request-facts.ts',
    'core/fleet/change-log.ts',
    'core/decide/load.ts',
    'core/policy/inputs.ts',
    'sdk/index.ts',
    'core/diagnostics/problem.ts',
    'core/plugins/registry.ts',
    'plugins/index.ts',
  ];
  const modules = await Promise.all(paths.map((p) => import(`${dir}/${p}`)));
  const tree = Object.assign({}, ...modules);
  for (const name of Object.keys(here)) if (!(name in tree)) throw new Error(`${dir} has no ${name}`);
  return tree;
}

function policyWith(tree: Tree, replicas: number) {
  const general = /( {4}replicas:\n)((?: {6}- \{ id: l8-general-.*\n)+)/;
  const lines = Array.from(
    { length: replicas },
    (_, i) => `      - { id: l8-general-${i}, url: "http://127.0.0.1:${10000 + i}"${i === 0 ? ', adapters: [team-x-v3]' : ''} }\n`,
  ).join('');
  const pools = files['pools.yaml'].replace(general, (_m, head) => head + lines);
  const result = tree.buildSnapshot(tree.policyInputsFromTexts({ ...files, 'pools.yaml': pools }, { registry: tree.registryOf(tree.BUILTIN_STRATEGIES) }), {
    seed: 1,
  });
  if (!result.snapshot) throw new Error(result.problems.map(tree.formatProblem).join('\n'));
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
  readonly changes: ChangeLog;
  private readonly states = new Map<string, ReplicaState>();

  constructor(tree: Tree) {
    this.changes = new tree.ChangeLog();
  }

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
 * the previous releases' bench. Returns a stepper: each call routes the next
 * `n` requests, timing each into `samples` when given (else warm-up).
 */
function bench(replicas: number, live: boolean, tree: Tree = here) {
  const { requestFacts, decide, commit } = tree;
  const snapshot = policyWith(tree, replicas);
  const random = tree.seededRandom(3);
  const fleet = new BenchFleet(tree);
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
  const quota = new tree.MemoryQuotaStore();
  const unlimited = { check: (t: string, c: QuotaCost) => quota.check(t, c, {}, now), take: (t: string, c: QuotaCost) => quota.take(t, c, {}, now) };
  const env = tree.createEnv({ now: () => now, quota: unlimited });
  const inFlight: string[] = [];
  let i = 0;
  const run = { replicas: snapshot.replicas.size, general: replicas, samples: [] as number[], admitted: 0, suspended: 0 };
  /** `options`: the warm-up's first round times no pick (UNBUDGETED); the rest is decided as the router decides. */
  const step = (n: number, timed: boolean, options?: DecideOptions) => {
    for (const end = i + n; i < end; i++) {
      const input = requests[i % requests.length];
      const started = process.hrtime.bigint();
      const facts = requestFacts({ requestId: `b${i}`, ...input });
      const decision = decide(facts, snapshot, fleet, env, options);
      commit(decision, env); // as the router does: quota taken, strategies told (prefix-affinity remembers)
      const elapsed = Number(process.hrtime.bigint() - started) / 1000;
      if (timed) {
        run.samples.push(elapsed);
        if (decision.ok) run.admitted++;
        if (skippedSuspended(decision)) run.suspended++;
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
  };
  return { run, step };
}

const UNBUDGETED: DecideOptions = Object.freeze({ pickBudgetMs: Infinity });

/** Did the chain skip a strategy suspended for overrunning its budget (core/decide/budget.ts)? */
function skippedSuspended(decision: Decision): boolean {
  const alternatives = decision.trace.replica?.alternatives ?? [];
  return alternatives.some((a) => a.note === 'skipped: suspended for overrunning its budget' || a.note === 'skipped: over budget 3 times, suspended');
}

// BENCH_REPLICAS=512 (comma-separated) runs only those pool sizes.
const sizes = process.env.BENCH_REPLICAS ? process.env.BENCH_REPLICAS.split(',').map(Number) : [8, 64, 512];
const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const baseline = process.env.BENCH_BASELINE ? await treeAt(process.env.BENCH_BASELINE) : undefined;
const trees = baseline ? [baseline, here] : [here];
const configurations = [false, true].flatMap((live) => sizes.map((n) => ({ live, n })));
const benches = trees.map((tree) => configurations.map(({ live, n }) => bench(n, live, tree)));
const all = benches.flat();
// A fresh process's JIT is still settling well past one configuration's warm-up: every one warms up first.
// Its first round's picks are not held against their budgets: compiling them overruns the 1 ms budget
// often enough to suspend a strategy for the 10 s of the run that follows (prefix-affinity's share then
// went to power-of-two), which is the warm-up's doing, not the decisions'. The second round and the
// timed ones count every pick, as the router does.
for (const b of all) b.step(2000, false, UNBUDGETED);
for (const b of all) b.step(2000, false);
// 20,000 timed requests of each, in batches of 200 taken in turn (the order rotating): the shared
// machine's load drifts within seconds, and so falls alike on every configuration and tree.
const BATCH = 200;
const batches = 20_000 / BATCH;
for (let k = 0; k < batches; k++) for (let j = 0; j < all.length; j++) all[(j + k) % all.length].step(BATCH, true);

const percentile = (sorted: Float64Array, p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
/** p50, p99 and mean of the samples, and the p50 of each of `rounds` consecutive parts: their spread. */
function summary(samples: number[]) {
  const sorted = Float64Array.from(samples).sort();
  const part = Math.floor(samples.length / rounds);
  const parts = Array.from({ length: rounds }, (_, r) => percentile(Float64Array.from(samples.slice(r * part, (r + 1) * part)).sort(), 0.5));
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  return { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), mean, low: Math.min(...parts), high: Math.max(...parts) };
}
const summaries = benches.map((list) => list.map((b) => summary(b.run.samples)));

console.log('decide() + commit(): request facts, the four decisions and what they set off, µs per request (one process, one core)');
console.log(
  `batches of ${BATCH} of every configuration in turn; p50 (lowest–highest p50 of ${rounds} consecutive parts)${baseline ? `; baseline ${process.env.BENCH_BASELINE}` : ''}`,
);
console.log(`${baseline ? 'tree     | ' : ''}fleet  | general-pool replicas | fleet replicas |            p50 µs |   p99 µs |  mean µs | admitted | suspended`);
configurations.forEach(({ live }, c) => {
  trees.forEach((tree, t) => {
    const { run } = benches[t][c];
    const r = summaries[t][c];
    const p50 = `${r.p50.toFixed(1)} (${r.low.toFixed(1)}–${r.high.toFixed(1)})`;
    console.log(
      `${baseline ? `${(tree === here ? 'this' : 'baseline').padEnd(8)} | ` : ''}${(live ? 'live' : 'still').padEnd(6)} | ${String(run.general).padStart(21)} | ${String(run.replicas).padStart(14)} | ${p50.padStart(17)} | ${r.p99.toFixed(1).padStart(8)} | ${r.mean.toFixed(1).padStart(8)} | ${`${((run.admitted / run.samples.length) * 100).toFixed(0)}%`.padStart(8)} | ${((run.suspended / run.samples.length) * 100).toFixed(1)}%`,
    );
  });
  if (baseline) {
    const [b, h] = [summaries[0][c], summaries[1][c]];
    console.log(`this ÷ baseline: p50 ${(h.p50 / b.p50).toFixed(3)}, p99 ${(h.p99 / b.p99).toFixed(3)}, mean ${(h.mean / b.mean).toFixed(3)}`);
  }
});
