// H. Priorities and shedding (docs/experiments.md): one pool shared by
// interactive (priority 0) and batch (-1) traffic below, at and beyond its
// capacity, with the pool's shedding on and off. Shedding refuses batch
// requests as the engines' queues fill, so interactive requests find short
// queues; without it both tiers wait in the same queues and are refused alike.
import type { WorkloadSpec } from '../workload/load.ts';
import { frac, markdownTable, ms, runOnce, scaled, type Experiment, type ExperimentOptions, type Row } from './experiment.ts';

/** Two replicas of the 8B profile complete about this many requests/s of this traffic. */
export const CAPACITY_RPS = 95;
export const LOADS = [0.8, 1.2, 2] as const;
const BATCH_FRACTION = 0.5;

export function mixedWorkload(requests: number, rate: number): WorkloadSpec {
  return {
    kind: 'workload',
    requests,
    arrivals: { process: 'poisson', rate },
    batch_fraction: BATCH_FRACTION,
    system_prompts: { count: 40, zipf: 1, tokens: { type: 'uniform', min: 200, max: 800 } },
  };
}

const pct = (x: string | number) => `${(Number(x) * 100).toFixed(1)}%`;
const msText = (x: string | number) => (Number(x) >= 1000 ? `${(Number(x) / 1000).toFixed(1)} s` : `${Math.round(Number(x))} ms`);

/** The runs' rows: one per load and shedding mode. */
export function priorityRows(options: ExperimentOptions, requests: number, loads: readonly number[] = LOADS): Row[] {
  const rows: Row[] = [];
  for (const load of loads) {
    const rate = Math.round(CAPACITY_RPS * load);
    const workload = mixedWorkload(requests, rate);
    for (const mode of ['probabilistic', 'off'] as const) {
      const r = runOnce(
        `${load}× (${rate} req/s), shedding ${mode}`,
        {
          policy: { pools: [{ name: 'shared', replicas: 2, strategies: ['power-of-two'], shedding: { mode } }] },
          workload,
        },
        options,
      );
      const interactive = r.priorities['0'];
      const batch = r.priorities['-1'];
      if (!interactive || !batch) throw new Error(`priority experiment: the workload sent no ${interactive ? 'batch' : 'interactive'} requests`);
      rows.push({
        load,
        rate,
        shedding: mode,
        interactive_ttft_p50_ms: ms(interactive.ttftMs.p50),
        interactive_ttft_p99_ms: ms(interactive.ttftMs.p99),
        interactive_refused_share: frac(interactive.rejected / Math.max(1, interactive.requests)),
        batch_shed_share: frac((batch.rejections.shed_for_priority ?? 0) / Math.max(1, batch.requests)),
        batch_refused_share: frac(batch.rejected / Math.max(1, batch.requests)),
        batch_ttft_p99_ms: ms(batch.ttftMs.p99),
        goodput_rps: frac(r.overall.throughputRps),
        interactive_goodput_rps: frac(interactive.throughputRps),
      });
    }
  }
  return rows;
}

export const priority: Experiment = {
  name: 'priority',
  letter: 'H',
  title: 'Priorities and shedding in a shared pool',
  run(options: ExperimentOptions) {
    const requests = scaled(20_000, options);
    const rows = priorityRows(options, requests);
    const at = (load: number, mode: string) => rows.find((r) => r.load === load && r.shedding === mode)!;
    const on = at(2, 'probabilistic');
    const off = at(2, 'off');
    const plotRows = rows.map((r) => ({ ...r, shedding: r.shedding === 'off' ? 'shedding off' : 'shedding on' }));
    const panel = (field: string, title: string) => ({
      width: 260,
      height: 200,
      mark: { type: 'line' as const, point: true },
      encoding: {
        x: { field: 'load', type: 'quantitative' as const, title: 'offered load (× capacity)' },
        y: { field, type: 'quantitative' as const, title },
        color: { field: 'shedding', type: 'nominal' as const, title: null, legend: { orient: 'bottom' as const } },
      },
    });
    const spec = {
      title: { text: 'H. Interactive (0) and batch (-1) traffic in one pool (2 × 8B), shedding on and off' },
      data: { values: plotRows },
      hconcat: [
        panel('interactive_ttft_p99_ms', 'interactive TTFT p99 (ms)'),
        panel('batch_shed_share', 'share of batch shed'),
        panel('goodput_rps', 'completed requests/s'),
      ],
    };
    const summary = [
      `Two replicas of the 8B profile (about ${CAPACITY_RPS} requests/s of this traffic), power of two, Poisson arrivals at`,
      `${LOADS.map((l) => `${l}×`).join(', ')} that capacity; ${BATCH_FRACTION * 100}% of requests are sent with \`x-priority: batch\` (-1), the rest`,
      `without one (interactive, 0); Azure-shaped lengths, 40 shared system prompts; ${requests} requests per run. "On" is the`,
      `pool's default shedding curve (llm-d's, docs/policies.md "Shedding"); "off" is \`shedding: { mode: off }\`.`,
      '',
      markdownTable(rows, {
        load: (r) => `${r.load}× (${r.rate}/s)`,
        shedding: (r) => (r.shedding === 'off' ? 'off' : 'on'),
        'interactive TTFT p50': (r) => msText(r.interactive_ttft_p50_ms),
        'interactive TTFT p99': (r) => msText(r.interactive_ttft_p99_ms),
        'interactive refused': (r) => pct(r.interactive_refused_share),
        'batch shed': (r) => pct(r.batch_shed_share),
        'batch refused (all reasons)': (r) => pct(r.batch_refused_share),
        'done/s': (r) => Number(r.goodput_rps).toFixed(1),
        'interactive done/s': (r) => Number(r.interactive_goodput_rps).toFixed(1),
      }),
      '',
      `**At 2×:** shedding brings the interactive tier's p99 TTFT from ${msText(off.interactive_ttft_p99_ms)} to ${msText(on.interactive_ttft_p99_ms)} and refuses ${pct(on.interactive_refused_share)} of it (against ${pct(off.interactive_refused_share)}), by shedding ${pct(on.batch_shed_share)} of batch; goodput ${Number(on.goodput_rps).toFixed(1)} against ${Number(off.goodput_rps).toFixed(1)} requests/s.`,
    ].join('\n');
    return { rows, plots: [{ name: '', spec: spec as never }], summary };
  },
};
