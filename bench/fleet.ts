// npm run bench:fleet — routing quality under cache pressure, with one and
// three routers (docs/experiments.md, "Routing quality under cache pressure"):
// conversations over a library of ~3k-token documents (Zipf 0.8, 2–4 turns,
// think times 0.5 s and 10 s) whose documents hold several times the fleet's
// KV cache, through the simulator (the engine model the emulator runs), for
// session hashing and the KV-event-driven precise-prefix chain; plus the hit
// rate of one engine with the whole fleet's cache and batch, which no
// placement across four caches can beat. With 3 routers each request goes to
// one of them at random.
//
//   node --import tsx bench/fleet.ts [--conversations 4000] [--rate 22] [--think 0.5,10]
//     [--documents 1000] [--cache-fraction 0.25 | --blocks N] [--seed 1] [--all]
// --blocks gives each replica N KV blocks of 16 tokens (and a max_model_len of N × 16), as
// bench:fleet-sockets does, so that its configuration's bound can be computed here.
// The defaults are the run; on a busy machine scale it down with
// --conversations (the rate, documents and caches stay as they are).
import { parseArgs } from 'node:util';
import { PROFILES, type EngineProfile } from '../sim/engine/profiles.ts';
import { affinityChain, fleetPolicy, type StrategySpec } from '../sim/experiments/fleet-policy.ts';
import { simulate, type SimResult } from '../sim/simulator/simulator.ts';
import { CACHE_PRESSURE_DEFAULTS, cachePressureWorkload } from '../sim/workload/cache-pressure.ts';
import { workloadFromSpec } from '../sim/workload/load.ts';
import { registryOf } from '../core/plugins/registry.ts';
import { BUILTIN_STRATEGIES } from '../plugins/index.ts';

const { values } = parseArgs({
  options: {
    conversations: { type: 'string', default: String(CACHE_PRESSURE_DEFAULTS.conversations) },
    rate: { type: 'string', default: String(CACHE_PRESSURE_DEFAULTS.rate) },
    think: { type: 'string', default: '0.5,10' },
    documents: { type: 'string', default: String(CACHE_PRESSURE_DEFAULTS.documents) },
    seed: { type: 'string', default: '1' },
    'cache-fraction': { type: 'string', default: '0.25' },
    blocks: { type: 'string' },
    all: { type: 'boolean', default: false },
  },
});
const conversations = Number(values.conversations);
const rate = Number(values.rate);
const documents = Number(values.documents);
const thinks = values.think.split(',').map(Number);
const cacheFraction = Number(values['cache-fraction']);
const blocks = values.blocks === undefined ? undefined : Number(values.blocks);
for (const [name, n] of [
  ['conversations', conversations],
  ['rate', rate],
  ['documents', documents],
  ['cache-fraction', cacheFraction],
  ...(blocks === undefined ? [] : [['blocks', blocks] as const]),
  ...thinks.map((t) => ['think', t] as const),
] as const) {
  if (!(Number.isFinite(n) && n > 0)) throw new Error(`--${name} must be a positive number, not ${n}`);
}
const REPLICAS = 4;

// The 8B H100 profile with a fraction of its KV cache (--cache-fraction; a GPU shared with other
// work, or a bigger model): at 0.25, 117k tokens each, 467k for the fleet, so that 1,000
// documents of ~3k tokens (3M) keep the caches evicting.
const base = PROFILES['llama-3.1-8b-h100'];
const replicaProfile: EngineProfile =
  blocks === undefined
    ? { ...base, name: 'bench-8b', numGpuBlocks: Math.floor(base.numGpuBlocks * cacheFraction), maxModelLen: 32_768 }
    : { ...base, name: 'bench-8b', numGpuBlocks: Math.floor(blocks), maxModelLen: Math.floor(blocks) * 16 };
// The bound: one engine with the fleet's cache, batch and token budget, each token costing a
// quarter, so it runs the fleet's load at one replica's step times.
const oracleProfile: EngineProfile = {
  ...replicaProfile,
  name: 'oracle',
  numGpuBlocks: replicaProfile.numGpuBlocks * REPLICAS,
  maxNumSeqs: replicaProfile.maxNumSeqs * REPLICAS,
  maxNumBatchedTokens: replicaProfile.maxNumBatchedTokens * REPLICAS,
  prefillTokenMs: replicaProfile.prefillTokenMs / REPLICAS,
  decodeTokenMs: replicaProfile.decodeTokenMs / REPLICAS,
  attentionPairMs: replicaProfile.attentionPairMs / REPLICAS,
};

const CHAINS: { label: string; chain: StrategySpec[]; kvEvents?: boolean; always?: boolean }[] = [
  { label: 'session hashing', chain: ['session-affinity', 'prefix-affinity', 'power-of-two'], always: true },
  { label: 'precise-prefix', chain: ['precise-prefix', 'prefix-affinity', 'power-of-two'], kvEvents: true, always: true },
  { label: 'round-robin', chain: ['round-robin'] },
  { label: 'approx. prefix chain', chain: affinityChain() },
];

function run(
  chain: StrategySpec[],
  routers: number,
  kvEvents: boolean,
  profile: EngineProfile,
  replicas: number,
  thinkS: number,
): { result: SimResult; decidedBy: Map<string, number> } {
  const policy = fleetPolicy({ pools: [{ name: 'general', replicas, strategies: chain, profile: profile.name, kvEvents }] }, registryOf(BUILTIN_STRATEGIES));
  const decidedBy = new Map<string, number>();
  const result = simulate({
    policy,
    workload: workloadFromSpec('bench-fleet', cachePressureWorkload({ conversations, rate, documents, thinkS })),
    seed: values.seed,
    routers,
    profiles: { [profile.name]: profile },
    onDecision: (d) => {
      if (d.ok) decidedBy.set(d.value.strategy, (decidedBy.get(d.value.strategy) ?? 0) + 1);
    },
  });
  return { result, decidedBy };
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const shares = (decidedBy: Map<string, number>) => {
  const total = [...decidedBy.values()].reduce((a, b) => a + b, 0);
  return [...decidedBy]
    .sort((a, b) => b[1] - a[1])
    .map(([name, n]) => `${name} ${((n / total) * 100).toFixed(0)}%`)
    .join(', ');
};
console.log(
  `fleet: ${REPLICAS} × llama-3.1-8b-h100 with ${replicaProfile.numGpuBlocks.toLocaleString('en-US')} KV blocks each (${((replicaProfile.numGpuBlocks * 16) / 1000).toFixed(0)}k tokens; fleet ${((REPLICAS * replicaProfile.numGpuBlocks * 16) / 1000).toFixed(0)}k)`,
);
console.log(
  `workload: ${conversations.toLocaleString('en-US')} conversations (2–4 turns), Poisson ${rate} req/s, ${documents.toLocaleString('en-US')} documents of 2.5–3.5k tokens (Zipf 0.8, ~${((documents * 3000) / 1e6).toFixed(1)}M tokens in all), seed ${values.seed}`,
);
const cpu = process.cpuUsage();
for (const thinkS of thinks) {
  console.log(`\nthink time ${thinkS} s\n strategy          | routers | hit rate | TTFT p50 | TTFT p99 | decided by`);
  for (const { label, chain, kvEvents, always } of CHAINS) {
    if (!always && !values.all) continue;
    for (const routers of [1, 3]) {
      const { result, decidedBy } = run(chain, routers, kvEvents ?? false, replicaProfile, REPLICAS, thinkS);
      const o = result.overall;
      console.log(
        ` ${label.padEnd(17)} | ${String(routers).padStart(7)} | ${pct(o.prefixHitRate).padStart(8)} | ${o.ttftMs.p50.toFixed(0).padStart(6)}ms | ${o.ttftMs.p99.toFixed(0).padStart(6)}ms | ${shares(decidedBy)}`,
      );
    }
  }
  const oracle = run(['round-robin'], 1, false, oracleProfile, 1, thinkS).result.overall;
  console.log(` ${'bound: one cache'.padEnd(17)} | ${'-'.padStart(7)} | ${pct(oracle.prefixHitRate).padStart(8)} | (one engine with the fleet's cache)`);
}
const used = process.cpuUsage(cpu);
console.log(`\n${((used.user + used.system) / 1e6).toFixed(1)} CPU s`);
