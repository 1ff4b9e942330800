// D. Metric freshness (docs/experiments.md): load data 1,
// 5, 30 and 300 s stale, for power of two and least-load against random and
// round-robin, with one router and with eight. Mitzenmacher ("How useful is
// old information?") predicts herding: every router sends to the replica
// that looked least loaded, until the next update shows it swamped; two
// random choices resist far longer than "least loaded".
import type { WorkloadSpec } from '../workload/load.ts';
import { frac, markdownTable, ms, runOnce, type Experiment, type ExperimentOptions, type Row } from './experiment.ts';

const STALENESS_S = [1, 5, 30, 300];
const STRATEGIES = ['power-of-two', 'least-load', 'random', 'round-robin'];
const ROUTERS = [1, 8];
const RATE = 180;
/** Used for the naive router: scraped data is used however old it is. */
const NEVER_STALE_MS = 1_000_000_000;

function workload(durationS: number): WorkloadSpec {
  return {
    kind: 'workload',
    duration_s: durationS,
    arrivals: { process: 'poisson', rate: RATE },
    system_prompts: { count: 40, zipf: 1, tokens: { type: 'uniform', min: 200, max: 800 } },
  };
}

export const staleness: Experiment = {
  name: 'staleness',
  letter: 'D',
  title: 'Metric freshness',
  run(options: ExperimentOptions) {
    const rows: Row[] = [];
    const run = (stale: number, routers: number, strategy: string, maxStalenessMs: number, variant: string) => {
      // Long enough for several updates at every staleness.
      const durationS = Math.max(60, Math.round(Math.max(120, 4 * stale) * options.scale));
      const r = runOnce(
        `${stale} s stale, ${routers} router${routers > 1 ? 's' : ''}, ${strategy}${variant ? ` (${variant})` : ''}`,
        {
          policy: { pools: [{ name: 'general', replicas: 4, strategies: [strategy] }], settings: { max_staleness_ms: maxStalenessMs } },
          workload: workload(durationS),
          sim: { routers, scrapeIntervalMs: stale * 1000 },
        },
        options,
      );
      const o = r.overall;
      rows.push({
        staleness_s: stale,
        routers,
        strategy: variant ? `${strategy} (${variant})` : strategy,
        ttft_p50_ms: ms(o.ttftMs.p50),
        ttft_p99_ms: ms(o.ttftMs.p99),
        e2e_p99_ms: ms(o.e2eMs.p99),
        rejected_share: frac(o.rejected / Math.max(1, o.requests)),
        requests: o.requests,
      });
    };
    for (const routers of ROUTERS) for (const stale of STALENESS_S) for (const strategy of STRATEGIES) run(stale, routers, strategy, NEVER_STALE_MS, '');
    // Switchyard's guard: past max_staleness_ms (5 s by default) the router estimates load from its own in-flight counts.
    for (const stale of STALENESS_S.filter((s) => s > 5))
      for (const strategy of ['power-of-two', 'least-load']) run(stale, 8, strategy, 5000, 'max_staleness 5 s');

    const get = (stale: number, routers: number, strategy: string) =>
      rows.find((r) => r.staleness_s === stale && r.routers === routers && r.strategy === strategy)!;
    // Worse: a p99 TTFT more than 10% above random's (smaller gaps are within run-to-run noise).
    const worseThanRandom = (routers: number, strategy: string) =>
      STALENESS_S.find((s) => Number(get(s, routers, strategy).ttft_p99_ms) > 1.1 * Number(get(s, routers, 'random').ttft_p99_ms));
    const verdict = (routers: number, strategy: string) => {
      const s = worseThanRandom(routers, strategy);
      const fresh = get(1, routers, strategy);
      const random1 = get(1, routers, 'random');
      const start = `at 1 s ${fresh.ttft_p99_ms} ms p99 TTFT (random ${random1.ttft_p99_ms} ms)`;
      return s === undefined
        ? `${start}; never more than 10% worse than random up to 300 s`
        : `${start}; worse than random from **${s} s** stale (${get(s, routers, strategy).ttft_p99_ms} ms vs ${get(s, routers, 'random').ttft_p99_ms} ms)`;
    };

    const plotRows = rows.map((r) => ({
      ...r,
      rejected_pct: Number(r.rejected_share) * 100,
      routers_label: `${r.routers} router${Number(r.routers) > 1 ? 's' : ''}`,
    }));
    const panel = (field: string, title: string, log = true) => ({
      width: 250,
      height: log ? 200 : 110,
      mark: { type: 'line' as const, point: true },
      encoding: {
        x: {
          field: 'staleness_s',
          type: 'quantitative' as const,
          title: 'load data age: scrape interval (s, log)',
          scale: { type: 'log' as const, domain: [1, 300] },
          axis: { values: STALENESS_S },
        },
        y: { field, type: 'quantitative' as const, title, ...(log ? { scale: { type: 'log' as const } } : {}) },
        color: { field: 'strategy', type: 'nominal' as const, title: null, legend: { orient: 'bottom' as const, columns: 3 } },
      },
    });
    const spec = {
      title: {
        text: `D. Stale load data (4 × 8B, ${RATE} req/s Poisson)`,
        subtitle: 'each router scrapes every N s on its own schedule; the naive router uses the data however old',
      },
      data: { values: plotRows },
      vconcat: [
        { facet: { column: { field: 'routers_label', type: 'nominal' as const, title: null } }, spec: panel('ttft_p99_ms', 'p99 TTFT (ms, log)') },
        { facet: { column: { field: 'routers_label', type: 'nominal' as const, title: null } }, spec: panel('ttft_p50_ms', 'p50 TTFT (ms, log)') },
        { facet: { column: { field: 'routers_label', type: 'nominal' as const, title: null } }, spec: panel('rejected_pct', 'rejected (%)', false) },
      ],
    };

    const summary = [
      `Four replicas of the 8B profile at ${RATE} requests/s (about 95% of what they sustain), Azure-shaped chat with 40 shared`,
      `system prompts. Load data is N seconds stale: each router instance scrapes every N s (its own schedule, offset`,
      `from the others), so what it routes on is 0 to N s old — Mitzenmacher's periodic-update model. Runs last`,
      `max(120 s, 4N) of virtual time. With 8 routers each one's own in-flight count covers only 1/8 of the traffic.`,
      `The naive router uses scraped data however old; the rows marked "max_staleness 5 s" are Switchyard's default`,
      `guard, which replaces data older than 5 s by the router's own in-flight counts.`,
      '',
      `- **1 router:** power-of-two ${verdict(1, 'power-of-two')}; least-load ${verdict(1, 'least-load')}.`,
      `- **8 routers:** power-of-two ${verdict(8, 'power-of-two')}; least-load ${verdict(8, 'least-load')}.`,
      `- **Refusals:** with one router, stale data makes the capacity check refuse ${STALENESS_S.filter((x) => x >= 30)
        .map((x) => `${(Number(get(x, 1, 'power-of-two').rejected_share) * 100).toFixed(1)}% at ${x} s`)
        .join(' and ')} (power of two; random ${STALENESS_S.filter((x) => x >= 30)
        .map((x) => `${(Number(get(x, 1, 'random').rejected_share) * 100).toFixed(1)}%`)
        .join(' and ')}) — the lower TTFT there is partly load that was turned away.`,
      '',
      markdownTable(rows, {
        stale: (r) => `${r.staleness_s} s`,
        routers: 'routers',
        strategy: 'strategy',
        'TTFT p50': (r) => `${r.ttft_p50_ms} ms`,
        'TTFT p99': (r) => `${r.ttft_p99_ms} ms`,
        'E2E p99': (r) => `${r.e2e_p99_ms} ms`,
        rejected: (r) => `${(Number(r.rejected_share) * 100).toFixed(1)}%`,
      }),
      '',
      'What it shows: several routers reading the same stale numbers herd — each sends its traffic to the replica',
      'that looked least loaded until the next scrape shows it swamped. Least-load herds hardest; power of two',
      'samples two replicas at random and so spreads the error, as the theory predicts. One router is protected by its',
      'own exact in-flight counts (the queue it estimates is never below what it sent), but stale "running" counts',
      'inflate that estimate and the capacity check starts refusing requests (no_capacity) the fleet could serve.',
      'Keep load data fresh (1–5 s), keep max_staleness_ms small so stale data is replaced by local counts, and',
      'prefer power of two over least-load whenever more than one router instance routes the same fleet. For',
      'identical replicas and steady traffic, round-robin is a strong baseline on TTFT.',
    ].join('\n');
    return { rows, plots: [{ name: '', spec: spec as never }], summary };
  },
};
