// E. Long-context segregation (docs/experiments.md): 2% of
// requests at 64k tokens, on one shared pool or on a pool of their own; the
// p99 TTFT of the other 98%.
import type { WorkloadSpec } from '../workload/load.ts';
import { BASELINES, frac, markdownTable, ms, runOnce, scaled, type Experiment, type ExperimentOptions, type Row } from './experiment.ts';
import type { FleetPolicySpec } from './fleet-policy.ts';

const RATES = [10, 20, 30];
const GENERAL = 3;
const LONG = 3;

export function longContextWorkload(requests: number, rate: number): WorkloadSpec {
  return {
    kind: 'workload',
    requests,
    arrivals: { process: 'poisson', rate },
    system_prompts: { count: 40, zipf: 1, tokens: { type: 'uniform', min: 200, max: 800 } },
    long_context: { fraction: 0.02, prompt_tokens: 65_536 },
  };
}

/** One pool of GENERAL + LONG replicas, or GENERAL for short prompts and LONG behind a "> 16k tokens" rule. */
export function segregationPolicy(segregated: boolean, strategy: string): FleetPolicySpec {
  if (!segregated) return { pools: [{ name: 'general', replicas: GENERAL + LONG, strategies: [strategy], maxModelLen: 131_072 }] };
  return {
    pools: [
      { name: 'general', replicas: GENERAL, strategies: [strategy], maxModelLen: 16_384 },
      { name: 'long-context', replicas: LONG, strategies: [strategy], maxModelLen: 131_072 },
    ],
    rules: [{ name: 'long prompts go to the long-context pool', fact: 'promptTokens', operator: 'greaterThan', value: 16_000, pool: 'long-context' }],
  };
}

export const longContext: Experiment = {
  name: 'long-context',
  letter: 'E',
  title: 'Long-context segregation',
  run(options: ExperimentOptions) {
    const requests = scaled(10_000, options);
    const rows: Row[] = [];
    for (const rate of RATES) {
      const workload = longContextWorkload(requests, rate);
      for (const segregated of [false, true]) {
        for (const strategy of ['power-of-two', ...BASELINES]) {
          const setup = segregated ? `segregated (${GENERAL} + ${LONG})` : `one pool of ${GENERAL + LONG}`;
          const r = runOnce(`${rate} req/s, ${setup}, ${strategy}`, { policy: segregationPolicy(segregated, strategy), workload }, options);
          const short = r.classes['standard'];
          const long = r.classes['long-context'];
          rows.push({
            rate,
            setup: segregated ? 'segregated' : 'one pool',
            strategy,
            short_ttft_p50_ms: ms(short?.ttftMs.p50 ?? NaN),
            short_ttft_p99_ms: ms(short?.ttftMs.p99 ?? NaN),
            short_e2e_p99_ms: ms(short?.e2eMs.p99 ?? NaN),
            long_ttft_p50_ms: ms(long?.ttftMs.p50 ?? NaN),
            long_ttft_p99_ms: ms(long?.ttftMs.p99 ?? NaN),
            long_requests: long?.requests ?? 0,
            rejected_share: frac(r.overall.rejected / Math.max(1, r.overall.requests)),
          });
        }
      }
    }

    const get = (rate: number, setup: string, strategy: string) => rows.find((r) => r.rate === rate && r.setup === setup && r.strategy === strategy)!;
    const plotRows = rows.map((r) => ({ ...r, series: `${r.setup}, ${r.strategy}` }));
    const panel = (field: string, title: string) => ({
      width: 300,
      height: 220,
      mark: { type: 'line' as const, point: true },
      encoding: {
        x: { field: 'rate', type: 'quantitative' as const, title: 'offered load (req/s)' },
        y: { field, type: 'quantitative' as const, title, scale: { type: 'log' as const } },
        color: { field: 'strategy', type: 'nominal' as const, title: 'strategy' },
        strokeDash: {
          field: 'setup',
          type: 'nominal' as const,
          title: 'pools',
          sort: ['one pool', 'segregated'],
          legend: {
            symbolType: 'stroke',
            symbolStrokeWidth: 2,
            symbolSize: 400,
            // The dash legend has no colour of its own: draw its swatches in grey, or they are invisible.
            encode: { symbols: { update: { stroke: { value: '#555' } } } },
          },
        },
      },
    });
    const spec = {
      title: {
        text: `E. Long-context segregation: 2% of requests at 64k tokens, ${GENERAL + LONG} × 8B`,
        subtitle: `solid: one pool of ${GENERAL + LONG}; dashed: ${GENERAL} general + ${LONG} long-context`,
      },
      data: { values: plotRows },
      hconcat: [panel('short_ttft_p99_ms', 'p99 TTFT of the other 98% (ms, log)'), panel('long_ttft_p50_ms', 'p50 TTFT of the 64k requests (ms, log)')],
    };
    const headline = RATES.map((rate) => {
      const mixed = get(rate, 'one pool', 'power-of-two');
      const seg = get(rate, 'segregated', 'power-of-two');
      return `| ${rate} | ${mixed.short_ttft_p99_ms} ms | ${seg.short_ttft_p99_ms} ms | ${(Number(mixed.short_ttft_p99_ms) / Number(seg.short_ttft_p99_ms)).toFixed(0)}× | ${mixed.long_ttft_p50_ms} ms | ${seg.long_ttft_p50_ms} ms |`;
    });
    const mid = get(RATES[1], 'one pool', 'power-of-two');
    const midSeg = get(RATES[1], 'segregated', 'power-of-two');
    const summary = [
      `${GENERAL + LONG} replicas of the 8B profile. Azure-shaped chat with 40 shared system prompts, plus 2% of requests with`,
      `a 65,536-token prompt (a ~3.5 s prefill on one H100). "One pool": all ${GENERAL + LONG} replicas serve everything`,
      `(max_model_len 131072). "Segregated": ${GENERAL} replicas serve prompts up to 16k tokens and a rule sends longer ones to`,
      `${LONG} replicas of their own — a one-line rule in rules.yaml. ${requests} requests per run.`,
      '',
      '| load (req/s) | short p99 TTFT, one pool | short p99 TTFT, segregated | ratio | 64k p50 TTFT, one pool | 64k p50 TTFT, segregated |',
      '| --- | --- | --- | --- | --- | --- |',
      ...headline,
      '',
      `**At ${RATES[1]} req/s** (power of two), segregation cuts the short requests' p99 TTFT from ${mid.short_ttft_p99_ms} ms to ${midSeg.short_ttft_p99_ms} ms.`,
      '',
      markdownTable(rows, {
        load: (r) => `${r.rate}`,
        pools: 'setup',
        strategy: 'strategy',
        'short TTFT p50': (r) => `${r.short_ttft_p50_ms} ms`,
        'short TTFT p99': (r) => `${r.short_ttft_p99_ms} ms`,
        '64k TTFT p50': (r) => `${r.long_ttft_p50_ms} ms`,
        '64k TTFT p99': (r) => `${r.long_ttft_p99_ms} ms`,
      }),
      '',
      'What it shows: the engine schedules running requests first, and a 64k prefill in progress takes the whole',
      'step token budget (8,192 tokens) for ~8 steps: requests that arrive meanwhile wait the full ~3.5 s for their',
      'first token. With 2% long requests each replica of a shared pool spends a large share of its time in such',
      'prefills, so the tail of everyone else is the length of a long prefill, whatever the strategy — no replica',
      'choice can avoid a replica that will start one a moment later. Segregation removes the effect at the cost',
      'of dedicated capacity: the long requests now queue among themselves (their own latency grows with load), so',
      'size the long-context pool for their load.',
    ].join('\n');
    return { rows, plots: [{ name: '', spec: spec as never }], summary };
  },
};
