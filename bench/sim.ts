// npm run bench:sim — simulated requests per CPU-second on the default
// 4-replica fleet (4 × llama-3.1-8b-h100, session affinity → power of two),
// and memory at 50k and 200k requests, which should stay flat: the
// simulator keeps histograms, not requests.
//
//   node --import tsx bench/sim.ts [--requests 50000,200000] [--chain default|reference|power-of-two]
//
// `--chain reference` adds prefix-affinity (the bundled policy's chain: the
// full chain), which costs more per request (see docs/simulator.md, "Speed").
//
// BENCH_BASELINE=DIR runs the simulator of another checkout (with its own
// node_modules) in the same process, alternated round by round with this
// one (BENCH_ROUNDS rounds, 3 by default, after a cold 50k of each), and
// prints each round's ratio: on a shared machine whose speed moves by half
// between runs minutes apart, only that ratio is a figure.
import { parseArgs } from 'node:util';
import { fleetPolicy, type StrategySpec } from '../sim/experiments/fleet-policy.ts';
import { simulate } from '../sim/simulator/simulator.ts';
import { workloadFromSpec, type WorkloadSpec } from '../sim/workload/load.ts';
import { registryOf } from '../core/plugins/registry.ts';
import { BUILTIN_STRATEGIES } from '../plugins/index.ts';
import type { SimResult } from '../sim/simulator/simulator.ts';

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

/** One checkout's simulator on bench's policy and workload. */
type Simulator = (requests: number, onTimeline: () => void) => SimResult;

function simulatorOf(modules: {
  fleetPolicy: typeof fleetPolicy;
  simulate: typeof simulate;
  workloadFromSpec: typeof workloadFromSpec;
  registryOf: typeof registryOf;
  BUILTIN_STRATEGIES: typeof BUILTIN_STRATEGIES;
}): Simulator {
  const policy = modules.fleetPolicy({ pools: [{ name: 'general', replicas: 4, strategies: chain }] }, modules.registryOf(modules.BUILTIN_STRATEGIES));
  return (requests, onTimeline) =>
    modules.simulate({ policy, workload: modules.workloadFromSpec('bench', workload(requests)), seed: 1, timelineIntervalMs: 10_000, onTimeline });
}

const current = simulatorOf({ fleetPolicy, simulate, workloadFromSpec, registryOf, BUILTIN_STRATEGIES });

async function baselineSimulator(dir: string): Promise<Simulator> {
  const [a, b, c, d, e] = await Promise.all([
    import(`${dir}/sim/experiments/fleet-policy.ts`),
    import(`${dir}/sim/simulator/simulator.ts`),
    import(`${dir}/sim/workload/load.ts`),
    import(`${dir}/core/plugins/registry.ts`),
    import(`${dir}/plugins/index.ts`),
  ]);
  return simulatorOf({ ...a, ...b, ...c, ...d, ...e });
}

function run(requests: number, sim: Simulator = current) {
  let peakHeap = 0;
  let peakRss = 0;
  const sample = () => {
    const m = process.memoryUsage();
    peakHeap = Math.max(peakHeap, m.heapUsed);
    peakRss = Math.max(peakRss, m.rss);
  };
  const cpu = process.cpuUsage();
  const wall = performance.now();
  const result = sim(requests, sample);
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
const sizes = values.requests!.split(',').map(Number);
if (process.env.BENCH_BASELINE) {
  const baseline = await baselineSimulator(process.env.BENCH_BASELINE);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
  console.log(`baseline: ${process.env.BENCH_BASELINE}, ${rounds} rounds alternated (ABBA)`);
  console.log('\n requests | round | baseline req / CPU s | this req / CPU s | this ÷ baseline');
  run(50_000, baseline);
  run(50_000);
  for (const n of sizes) {
    const ratios: number[] = [];
    for (let k = 0; k < rounds; k++) {
      // ABBA: which runs first alternates, so that a drift in the machine's speed falls on both.
      let b: ReturnType<typeof run>;
      let t: ReturnType<typeof run>;
      if (k % 2 === 0) {
        b = run(n, baseline);
        t = run(n);
      } else {
        t = run(n);
        b = run(n, baseline);
      }
      ratios.push(t.perCpuS / b.perCpuS);
      const fmt = (x: number) => Math.round(x).toLocaleString('en-US');
      console.log(
        `${String(n).padStart(9)} | ${String(k + 1).padStart(5)} | ${fmt(b.perCpuS).padStart(20)} | ${fmt(t.perCpuS).padStart(16)} | ${ratios[k].toFixed(2).padStart(15)}`,
      );
    }
    const sorted = [...ratios].sort((x, y) => x - y);
    const mid = sorted.length >> 1;
    const median = sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
    console.log(`${String(n).padStart(9)} | median ratio ${median.toFixed(2)}`);
  }
} else {
  console.log('\n requests | CPU s  | wall s | sim req / CPU s | events/req | virtual s | TTFT p99 | peak heap | peak RSS');
  // The first run pays for compiling the hot paths (V8 optimizes them over its first ~10^5 calls):
  // printed as what a short simulation in a fresh process sees; the runs after it are steady-state.
  row('cold 50k', run(50_000));
  for (const n of sizes) row(String(n), run(n));
}
if (values.chain === 'reference') {
  console.log('\nnote: prefix-affinity reads and updates its memory for every prompt block (~110 a request here):');
  console.log('      it costs more per request than the default chain (see docs/simulator.md, "Speed").');
}
