// npm run bench:sim — simulated requests per CPU-second on the default
// 4-replica fleet (4 × llama-3.1-8b-h100, session affinity → power of two),
// and memory at 50k and 200k requests, which should stay flat: the
// simulator keeps histograms, not requests.
//
//   node --import tsx bench/sim.ts [--requests 50000,200000] [--chain default|reference|power-of-two]
//
// `--chain reference` adds prefix-affinity (the bundled policy's chain: the
// full chain), which costs more per request (see docs/simulator.md, "Speed").
import { parseArgs } from 'node:util';
import { fleetPolicy, type StrategySpec } from '../sim/experiments/fleet-policy.ts';
import { simulate } from '../sim/simulator/simulator.ts';
import { workloadFromSpec, type WorkloadSpec } from '../sim/workload/load.ts';
import { registryOf } from '../core/plugins/registry.ts';
import { BUILTIN_STRATEGIES } from '../plugins/index.ts';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '50000,200000' },
    chain: { type: 'string', default: 'default' },
    rate: { type: 'string', default: '120' },
  },
});

const CHAINS: Record<string, StrategySpec[]> = {
  default: ['session-affinity', 'power-of-two'],
  reference: ['session-affinity', 'prefix-affinity', 'power-of-two'],
  'power-of-two': ['power-of-two'],
};
const chain = CHAINS[values.chain!];
if (!chain) throw new Error(`--chain must be one of ${Object.keys(CHAINS).join(', ')}`);
const rate = Number(values.rate);

function workload(requests: number): WorkloadSpec {
  return {
    kind: 'workload',
    requests,
    arrivals: { process: 'poisson', rate },
    sessions: { fraction: 0.3, turns: { type: 'geometric', mean: 4 }, think_time_s: { type: 'exponential', mean: 8 } },
    system_prompts: { count: 40, zipf: 1, tokens: { type: 'uniform', min: 200, max: 800 } },
  };
}

const policy = fleetPolicy({ pools: [{ name: 'general', replicas: 4, strategies: chain }] }, registryOf(BUILTIN_STRATEGIES));

function run(requests: number) {
  let peakHeap = 0;
  let peakRss = 0;
  const sample = () => {
    const m = process.memoryUsage();
    peakHeap = Math.max(peakHeap, m.heapUsed);
    peakRss = Math.max(peakRss, m.rss);
  };
  const cpu = process.cpuUsage();
  const wall = performance.now();
  const result = simulate({ policy, workload: workloadFromSpec('bench', workload(requests)), seed: 1, timelineIntervalMs: 10_000, onTimeline: sample });
  const used = process.cpuUsage(cpu);
  sample();
  const cpuS = (used.user + used.system) / 1e6;
  return { requests, cpuS, wallS: (performance.now() - wall) / 1000, perCpuS: requests / cpuS, peakHeap, peakRss, result };
}

console.log(`simulator: 4 × llama-3.1-8b-h100, chain ${chain.map((s) => (typeof s === 'string' ? s : s.name)).join(' → ')}`);
console.log(`workload: Azure-2023-shaped chat, Poisson ${rate} req/s, 30% conversations (4 turns), 40 shared system prompts (Zipf 1)`);
const row = (label: string, r: ReturnType<typeof run>) => {
  const o = r.result.overall;
  console.log(
    `${label.padStart(9)} | ${r.cpuS.toFixed(2).padStart(6)} | ${r.wallS.toFixed(2).padStart(6)} | ${Math.round(r.perCpuS).toLocaleString('en-US').padStart(15)} | ${(r.result.events / r.requests).toFixed(1).padStart(10)} | ${(r.result.simulatedMs / 1000).toFixed(0).padStart(9)} | ${o.ttftMs.p99.toFixed(0).padStart(6)}ms | ${(r.peakHeap / 1e6).toFixed(0).padStart(6)} MB | ${(r.peakRss / 1e6).toFixed(0).padStart(5)} MB`,
  );
};
console.log('\n requests | CPU s  | wall s | sim req / CPU s | events/req | virtual s | TTFT p99 | peak heap | peak RSS');
// The first run pays for compiling the hot paths (V8 optimizes them over its first ~10^5 calls):
// printed as what a short simulation in a fresh process sees; the runs after it are steady-state.
row('cold 50k', run(50_000));
for (const n of values.requests!.split(',').map(Number)) row(String(n), run(n));
if (values.chain === 'reference') {
  console.log('\nnote: prefix-affinity reads and updates its memory for every prompt block (~110 a request here):');
  console.log('      it costs more per request than the default chain (see docs/simulator.md, "Speed").');
}
