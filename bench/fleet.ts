// npm run bench:fleet — prefix caching under pressure, with one and three
// routers: a multi-turn workload whose shared system prompts hold more
// tokens than the fleet's KV cache, through the simulator (the engine model
// the emulator runs), for round-robin, session hashing, today's approximate
// prefix-affinity chain and the KV-event-driven precise-prefix plugin; plus
// the hit rate of an oracle: one engine with the whole fleet's cache and
// batch, whose hit rate no placement across four caches can beat.
//
//   node --import tsx bench/fleet.ts [--conversations 4000] [--rate 24] [--seed 1]
import { parseArgs } from 'node:util';
import { PROFILES, type EngineProfile } from '../sim/engine/profiles.ts';
import { affinityChain, fleetPolicy, type StrategySpec } from '../sim/experiments/fleet-policy.ts';
import { simulate, type SimResult } from '../sim/simulator/simulator.ts';
import { workloadFromSpec, type WorkloadSpec } from '../sim/workload/load.ts';
import { registryOf } from '../core/plugins/registry.ts';
import { BUILTIN_STRATEGIES } from '../plugins/index.ts';

const { values } = parseArgs({
  options: {
    conversations: { type: 'string', default: '4000' },
    rate: { type: 'string', default: '24' },
    seed: { type: 'string', default: '1' },
    'system-prompts': { type: 'string', default: '300' },
  },
});
const conversations = Number(values.conversations);
const rate = Number(values.rate);
const systemPrompts = Number(values['system-prompts']);
const REPLICAS = 4;
const TURNS = 4;

// The 8B H100 profile with a quarter of its KV cache (a GPU shared with other work, or a bigger
// model): 7,301 blocks, 117k tokens each, 467k for the fleet, so that 300 shared prompts of ~3k
// tokens (900k) overflow the fleet within a run of a few minutes of CPU.
const base = PROFILES['llama-3.1-8b-h100'];
const replicaProfile: EngineProfile = { ...base, name: 'bench-8b', numGpuBlocks: Math.floor(base.numGpuBlocks / 4), maxModelLen: 32_768 };
// The oracle: one engine with the fleet's cache, batch and token budget, each token costing a
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

const workload: WorkloadSpec = {
  kind: 'workload',
  requests: conversations * TURNS,
  arrivals: { process: 'poisson', rate },
  prompt_tokens: { type: 'lognormal', median: 3300, p99: 6000 },
  sessions: { fraction: 1, turns: { type: 'geometric', mean: TURNS }, think_time_s: { type: 'exponential', mean: 10 }, max_context_tokens: 16_000 },
  system_prompts: { count: systemPrompts, zipf: 0.6, tokens: { type: 'uniform', min: 2500, max: 3500 } },
};

const CHAINS: { label: string; chain: StrategySpec[]; kvEvents?: boolean }[] = [
  { label: 'round-robin', chain: ['round-robin'] },
  { label: 'session hashing', chain: ['session-affinity', 'power-of-two'] },
  { label: 'approx. prefix chain', chain: affinityChain() },
  { label: 'KV events (precise)', chain: ['precise-prefix', 'prefix-affinity', 'power-of-two'], kvEvents: true },
];

function run(chain: StrategySpec[], routers: number, kvEvents: boolean, profile: EngineProfile, replicas: number): SimResult {
  const policy = fleetPolicy({ pools: [{ name: 'general', replicas, strategies: chain, profile: profile.name, kvEvents }] }, registryOf(BUILTIN_STRATEGIES));
  return simulate({
    policy,
    workload: workloadFromSpec('bench-fleet', workload),
    seed: values.seed,
    routers,
    profiles: { [profile.name]: profile },
  });
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
console.log(`fleet: ${REPLICAS} × llama-3.1-8b-h100 with ${replicaProfile.numGpuBlocks.toLocaleString('en-US')} KV blocks each (${((replicaProfile.numGpuBlocks * 16) / 1000).toFixed(0)}k tokens; fleet ${((REPLICAS * replicaProfile.numGpuBlocks * 16) / 1000).toFixed(0)}k)`);
console.log(
  `workload: ${conversations.toLocaleString('en-US')} conversations (~${TURNS} turns, 10 s think time), Poisson ${rate} req/s, ${systemPrompts} system prompts of 2.5–3.5k tokens (Zipf 0.6, ~${((systemPrompts * 3000) / 1000).toFixed(0)}k tokens in all), prompts median 3.3k tokens`,
);
console.log('\n strategy             | routers | hit rate | TTFT p50 | TTFT p99 | throughput | preempted');
const cpu = process.cpuUsage();
for (const { label, chain, kvEvents } of CHAINS) {
  for (const routers of [1, 3]) {
    const o = run(chain, routers, kvEvents ?? false, replicaProfile, REPLICAS).overall;
    console.log(
      ` ${label.padEnd(20)} | ${String(routers).padStart(7)} | ${pct(o.prefixHitRate).padStart(8)} | ${o.ttftMs.p50.toFixed(0).padStart(6)}ms | ${o.ttftMs.p99.toFixed(0).padStart(6)}ms | ${o.throughputRps.toFixed(2).padStart(6)} r/s | ${String(o.preemptions).padStart(9)}`,
    );
  }
}
const oracle = run(['round-robin'], 1, false, oracleProfile, 1).overall;
console.log(` ${'oracle (one cache)'.padEnd(20)} | ${'-'.padStart(7)} | ${pct(oracle.prefixHitRate).padStart(8)} | (one engine with the fleet's cache: the hit rate bound)`);
const used = process.cpuUsage(cpu);
console.log(`\n${((used.user + used.system) / 1e6).toFixed(1)} CPU s`);
