// B. The affinity release threshold (docs/experiments.md):
// sweep it from 0.5 to 1.0 with a popular shared prefix and multi-turn
// conversations; prefix hit rate and p99 TTFT per threshold, and the optimum.
import type { WorkloadSpec } from '../workload/load.ts';
import { BASELINES, frac, markdownTable, ms, runOnce, scaled, type Experiment, type ExperimentOptions, type Row } from './experiment.ts';
import type { StrategySpec } from './fleet-policy.ts';

const THRESHOLDS = [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0];
const LOADS = [34, 38, 42, 46];
/** Large enough that the router's prefix memory never evicts in these runs. */
export const PREFIX_MEMORY = 4_000_000;

/**
 * Document Q&A: 200 long shared prefixes (5–7k tokens) with Zipf(1)
 * popularity, more than one replica's KV cache holds; a short question
 * after each. Where a prefix is computed matters.
 */
export function documentWorkload(requests: number, rate: number): WorkloadSpec {
  return {
    kind: 'workload',
    requests,
    arrivals: { process: 'poisson', rate },
    prompt_tokens: { type: 'uniform', min: 7000, max: 7600 },
    output_tokens: { type: 'lognormal', median: 300, mean: 480 },
    system_prompts: { count: 200, zipf: 1.0, tokens: { type: 'uniform', min: 5000, max: 7000 } },
  };
}

export function affinityChainAt(threshold: number): StrategySpec[] {
  return [
    { name: 'session-affinity', config: { release_threshold: threshold } },
    { name: 'prefix-affinity', config: { release_threshold: threshold, max_entries: PREFIX_MEMORY } },
    'power-of-two',
  ];
}

const pct = (x: string | number) => `${(Number(x) * 100).toFixed(1)}%`;

export const affinityThreshold: Experiment = {
  name: 'affinity-threshold',
  letter: 'B',
  title: 'The affinity release threshold',
  run(options: ExperimentOptions) {
    const requests = scaled(8000, options);
    const rows: Row[] = [];
    for (const rate of LOADS) {
      const workload = documentWorkload(requests, rate);
      const record = (strategy: string, threshold: number | string, strategies: StrategySpec[]) => {
        const r = runOnce(
          `${rate} req/s, ${strategy}${threshold !== '' ? ` release at ${threshold}` : ''}`,
          { policy: { pools: [{ name: 'general', replicas: 4, strategies }] }, workload },
          options,
        );
        const o = r.overall;
        rows.push({
          rate,
          strategy,
          threshold,
          prefix_hit_rate: frac(o.prefixHitRate),
          ttft_p50_ms: ms(o.ttftMs.p50),
          ttft_p99_ms: ms(o.ttftMs.p99),
          e2e_p99_ms: ms(o.e2eMs.p99),
          throughput_rps: frac(o.throughputRps),
          preemptions: o.preemptions,
          rejected: o.rejected,
        });
      };
      for (const t of THRESHOLDS) record('affinity chain', t, affinityChainAt(t));
      for (const b of BASELINES) record(b, '', [b]);
    }

    const chainRows = rows.filter((r) => r.strategy === 'affinity chain');
    const bestAt = (rate: number) => chainRows.filter((r) => r.rate === rate).reduce((a, b) => (Number(b.ttft_p99_ms) < Number(a.ttft_p99_ms) - 1e-9 ? b : a));
    const bestBaselineAt = (rate: number) =>
      rows.filter((r) => r.rate === rate && r.strategy !== 'affinity chain').reduce((a, b) => (Number(b.ttft_p99_ms) < Number(a.ttft_p99_ms) ? b : a));
    // The lowest threshold that keeps locality: within 2 points of the best hit rate at that load.
    const cliffAt = (rate: number) => {
      const list = chainRows.filter((r) => r.rate === rate);
      const top = Math.max(...list.map((r) => Number(r.prefix_hit_rate)));
      return list.find((r) => Number(r.prefix_hit_rate) >= top - 0.02)!;
    };

    const plotRows = chainRows.map((r) => ({ ...r, load: `${r.rate} req/s` }));
    const baselineRows = LOADS.map((rate) => ({ ...bestBaselineAt(rate), load: `${rate} req/s` }));
    const panel = (field: string, title: string, log: boolean) => ({
      width: 330,
      height: 230,
      layer: [
        {
          data: { values: plotRows },
          mark: { type: 'line' as const, point: true },
          encoding: {
            x: { field: 'threshold', type: 'quantitative' as const, title: 'release threshold (KV usage)', scale: { domain: [0.5, 1] } },
            y: { field, type: 'quantitative' as const, title, scale: log ? { type: 'log' as const } : { zero: false } },
            color: { field: 'load', type: 'nominal' as const, title: 'offered load' },
          },
        },
        {
          data: { values: baselineRows },
          mark: { type: 'rule' as const, strokeDash: [4, 3], opacity: 0.7 },
          encoding: { y: { field, type: 'quantitative' as const }, color: { field: 'load', type: 'nominal' as const } },
        },
      ],
    });
    const spec = {
      title: {
        text: 'B. Affinity release threshold (4 × 8B, document Q&A)',
        subtitle: 'lines: session → prefix affinity → power of two; dashed: best of round-robin, random, least-load',
      },
      hconcat: [panel('prefix_hit_rate', 'prefix-cache hit rate', false), panel('ttft_p99_ms', 'p99 TTFT (ms, log)', true)],
    };

    const lines = LOADS.map((rate) => {
      const best = bestAt(rate);
      const cliff = cliffAt(rate);
      const base = bestBaselineAt(rate);
      const low = chainRows.find((r) => r.rate === rate && r.threshold === 0.5)!;
      const overloaded = Number(best.rejected) > 0 || Number(best.preemptions) > 0;
      if (overloaded) {
        return `- **${rate} req/s:** overloaded (preemptions) at every threshold; the best is release at **${best.threshold}**: p50 TTFT ${best.ttft_p50_ms} ms, p99 ${best.ttft_p99_ms} ms, hit ${pct(best.prefix_hit_rate)}, ${best.rejected} refused; at 0.5: p99 ${low.ttft_p99_ms} ms, hit ${pct(low.prefix_hit_rate)}, ${low.rejected} refused. Best baseline (${base.strategy}): ${base.ttft_p99_ms} ms.`;
      }
      return `- **${rate} req/s:** lowest p99 TTFT from release **${best.threshold}** up (${best.ttft_p99_ms} ms, hit ${pct(best.prefix_hit_rate)}); locality holds from ${cliff.threshold}; at 0.5: ${low.ttft_p99_ms} ms, hit ${pct(low.prefix_hit_rate)}. Best baseline (${base.strategy}): ${base.ttft_p99_ms} ms, hit ${pct(base.prefix_hit_rate)}.`;
    });
    const summary = [
      `Four replicas of the 8B profile serve document Q&A: every prompt starts with one of 200 shared documents of`,
      `5–7k tokens (Zipf(1) popularity; together ~1.2M tokens, more than one replica's 467k-token KV cache) followed by a`,
      `short question; answers ~300 tokens (median). ${requests} requests per run at ${LOADS.join(', ')} requests/s. The chain is`,
      `session affinity → prefix affinity → power of two, both affinities with the same release threshold (the router's`,
      `prefix memory is sized so that it never evicts here: max_entries ${PREFIX_MEMORY.toLocaleString('en-US')}).`,
      '',
      ...lines,
      '',
      markdownTable(rows, {
        load: (r) => `${r.rate} req/s`,
        strategy: 'strategy',
        threshold: 'threshold',
        'prefix hit': (r) => pct(r.prefix_hit_rate),
        'TTFT p50': (r) => `${r.ttft_p50_ms} ms`,
        'TTFT p99': (r) => `${r.ttft_p99_ms} ms`,
        preemptions: 'preemptions',
        rejected: 'rejected',
      }),
      '',
      'What it shows: the threshold is a cliff, not a slope. Below a critical value, releases scatter documents over',
      'all replicas, every replica has to hold every popular document, the KV cache fills with duplicates, KV usage',
      'rises, which releases even more requests: the fleet falls into the same thrashing state as the load-only',
      'baselines (hit rate ~50%, preemptions, seconds of TTFT). Above it, each document stays where it is cached and KV',
      'usage stays low. The critical value rises with load, so tune the threshold at the peak load you expect and keep',
      'a margin above the cliff. "Too high" did not lose here: prefix affinity breaks ties towards the warm replica with',
      'the lowest KV usage, and decide() deprioritizes a replica whose queue reaches saturation.queue_depth, a second',
      'release valve that does not depend on KV usage.',
    ].join('\n');
    return { rows, plots: [{ name: '', spec: spec as never }], summary };
  },
};
