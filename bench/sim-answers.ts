// npm run bench:sim-answers — the simulator's answers on fixed seeds, as one
// digest per scenario: every result (hit rates, TTFT and E2E percentiles,
// rejections, per-replica figures), every request's CSV row (replica,
// cached tokens, times) and which strategy decided each request. Speed work
// on the simulator, the engine model or the strategies must leave every
// digest unchanged:
//
//   npm run bench:sim-answers -- --write /tmp/before.json   # on the old code
//   npm run bench:sim-answers -- --check /tmp/before.json   # on the new: exits 1 on any change
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { registryOf } from '../core/plugins/registry.ts';
import { BUILTIN_STRATEGIES } from '../plugins/index.ts';
import { PROFILES, type EngineProfile } from '../sim/engine/profiles.ts';
import { fleetPolicy, type FleetPolicySpec } from '../sim/experiments/fleet-policy.ts';
import { loraPolicy, loraWorkload } from '../sim/experiments/lora.ts';
import { simulate, type SimOptions } from '../sim/simulator/simulator.ts';
import { workloadFromSpec, type WorkloadSpec } from '../sim/workload/load.ts';

const { values } = parseArgs({ options: { write: { type: 'string' }, check: { type: 'string' }, requests: { type: 'string', default: '20000' } } });
const requests = Number(values.requests);
const registry = registryOf(BUILTIN_STRATEGIES);

/** bench:sim's workload. */
const benchWorkload = (n: number, rate = 120): WorkloadSpec => ({
  kind: 'workload',
  requests: n,
  arrivals: { process: 'poisson', rate },
  sessions: { fraction: 0.3, turns: { type: 'geometric', mean: 4 }, think_time_s: { type: 'exponential', mean: 8 } },
  system_prompts: { count: 40, zipf: 1, tokens: { type: 'uniform', min: 200, max: 800 } },
});
const small: EngineProfile = { ...PROFILES['llama-3.1-8b-h100'], name: 'small-cache', numGpuBlocks: 1600, maxModelLen: 16_384 };
const pressure: WorkloadSpec = {
  kind: 'workload',
  requests: Math.min(requests, 3000),
  arrivals: { process: 'poisson', rate: 20 },
  prompt_tokens: { type: 'uniform', min: 1800, max: 2600 },
  sessions: { fraction: 1, turns: { type: 'geometric', mean: 3 }, think_time_s: { type: 'exponential', mean: 3 }, max_context_tokens: 8000 },
  system_prompts: { count: 40, zipf: 0.6, tokens: { type: 'uniform', min: 1500, max: 2200 } },
};
const pool = (strategies: FleetPolicySpec['pools'][0]['strategies'], extra: Partial<FleetPolicySpec['pools'][0]> = {}): FleetPolicySpec => ({
  pools: [{ name: 'general', replicas: 4, strategies, ...extra }],
});

interface Scenario {
  readonly name: string;
  readonly options: () => Omit<SimOptions, 'outDir' | 'onDecision'>;
}

const SCENARIOS: Scenario[] = [
  {
    name: 'bench:sim --chain reference',
    options: () => ({
      policy: fleetPolicy(pool(['session-affinity', 'prefix-affinity', 'power-of-two']), registry),
      workload: workloadFromSpec('bench', benchWorkload(requests)),
      seed: 1,
    }),
  },
  {
    name: 'bench:sim (default chain)',
    options: () => ({
      policy: fleetPolicy(pool(['session-affinity', 'power-of-two']), registry),
      workload: workloadFromSpec('bench', benchWorkload(requests)),
      seed: 1,
    }),
  },
  {
    name: 'prefix-affinity, 3 routers, stale scrapes',
    options: () => ({
      policy: fleetPolicy(pool(['prefix-affinity', 'power-of-two']), registry),
      workload: workloadFromSpec('bench', benchWorkload(Math.min(requests, 8000), 100)),
      seed: 7,
      routers: 3,
      stalenessMs: 150,
    }),
  },
  {
    name: 'precise-prefix with KV events, small caches, 3 routers',
    options: () => ({
      policy: fleetPolicy(pool(['precise-prefix', 'prefix-affinity', 'power-of-two'], { profile: small.name, kvEvents: true }), registry),
      workload: workloadFromSpec('pressure', pressure),
      seed: 3,
      routers: 3,
      profiles: { [small.name]: small },
    }),
  },
  {
    name: 'session-affinity, small caches (preemption)',
    options: () => ({
      policy: fleetPolicy(pool(['session-affinity', 'least-load'], { profile: small.name }), registry),
      workload: workloadFromSpec('pressure', { ...pressure, arrivals: { process: 'poisson', rate: 40 } }),
      seed: 5,
      profiles: { [small.name]: small },
    }),
  },
  {
    name: 'lora affinity',
    options: () => ({
      policy: fleetPolicy(loraPolicy(['lora-affinity', 'power-of-two'], true), registry),
      workload: workloadFromSpec('lora', loraWorkload(Math.min(requests, 4000), 60)),
      seed: 2,
    }),
  },
];

function digest(scenario: Scenario): { digest: string; summary: string } {
  const dir = mkdtempSync(join(tmpdir(), 'sim-answers-'));
  try {
    const hash = createHash('sha256');
    const result = simulate({
      ...scenario.options(),
      outDir: dir,
      timelineIntervalMs: 10_000,
      onDecision: (d) => hash.update(d.ok ? `${d.value.replica}|${d.value.reason}\n` : `!${d.rejection.code}\n`),
    });
    hash.update(JSON.stringify({ ...result, files: [] }));
    for (const file of result.files) hash.update(readFileSync(file));
    const o = result.overall;
    return {
      digest: hash.digest('hex').slice(0, 16),
      summary: `completed ${o.completed}, hit ${(o.prefixHitRate * 100).toFixed(2)}%, TTFT p50/p99 ${o.ttftMs.p50.toFixed(1)}/${o.ttftMs.p99.toFixed(1)} ms`,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const now: Record<string, string> = {};
const before: Record<string, string> | undefined = values.check ? JSON.parse(readFileSync(values.check, 'utf8')) : undefined;
let changed = 0;
for (const scenario of SCENARIOS) {
  const { digest: d, summary } = digest(scenario);
  now[scenario.name] = d;
  const verdict = before === undefined ? '' : before[scenario.name] === d ? '  same' : `  CHANGED (was ${before[scenario.name]})`;
  if (before !== undefined && before[scenario.name] !== d) changed++;
  console.log(`${d}  ${scenario.name.padEnd(56)} ${summary}${verdict}`);
}
if (values.write) writeFileSync(values.write, `${JSON.stringify(now, null, 2)}\n`);
if (changed > 0) {
  console.error(`${changed} scenario(s) changed: the simulator's answers are not the same as in ${values.check}`);
  process.exitCode = 1;
}
