// I. The token valve (docs/experiments.md): short conversational requests
// mixed with 100k-token prompts on one pool. Prefix affinity keeps sending a
// shared prompt's requests to its replica; the KV-usage valve lets go only
// once a scrape shows the cache full, while the token valve sees at once the
// prompt tokens the router has in prefill there, and the load score steers
// new work away from a replica busy prefilling.
import type { WorkloadSpec } from '../workload/load.ts';
import { frac, markdownTable, ms, runOnce, scaled, type Experiment, type ExperimentOptions, type Row } from './experiment.ts';
import type { PoolSpec } from './fleet-policy.ts';

export const RATES = [10, 20, 30] as const;
const LONG_FRACTION = 0.01;
const LONG_TOKENS = 100_000;
const REPLICAS = 4;

export function mixedLengthWorkload(requests: number, rate: number): WorkloadSpec {
  return {
    kind: 'workload',
    requests,
    arrivals: { process: 'poisson', rate },
    system_prompts: { count: 40, zipf: 1, tokens: { type: 'uniform', min: 200, max: 800 } },
    long_context: { fraction: LONG_FRACTION, prompt_tokens: LONG_TOKENS },
  };
}

/** The two pools compared: the KV valve alone, and the token valve and token-weighted score beside it. */
export function valvePool(valve: 'kv' | 'token'): PoolSpec {
  const base = { name: 'general', replicas: REPLICAS, maxModelLen: 131_072 };
  if (valve === 'kv') return { ...base, strategies: [{ name: 'prefix-affinity', config: { release_threshold: 0.85 } }, 'power-of-two'] };
  return {
    ...base,
    strategies: [{ name: 'prefix-affinity', config: { release_threshold: 0.85, token_release_threshold: 0.5 } }, 'power-of-two'],
    tokenLoad: { full_prefill_tokens: 65_536 },
    loadScore: { kv_usage: 0.6, queue: 0.3, running: 0.1, token_load: 0.5 },
  };
}

export function tokenLoadRows(options: ExperimentOptions, requests: number, rates: readonly number[] = RATES): Row[] {
  const rows: Row[] = [];
  for (const rate of rates) {
    const workload = mixedLengthWorkload(requests, rate);
    for (const valve of ['kv', 'token'] as const) {
      const r = runOnce(
        `${rate} req/s, ${valve === 'kv' ? 'KV-usage valve' : 'token valve + score'}`,
        { policy: { pools: [valvePool(valve)] }, workload },
        options,
      );
      const short = r.classes['standard'];
      const long = r.classes['long-context'];
      rows.push({
        rate,
        valve,
        short_ttft_p50_ms: ms(short?.ttftMs.p50 ?? NaN),
        short_ttft_p99_ms: ms(short?.ttftMs.p99 ?? NaN),
        long_ttft_p50_ms: ms(long?.ttftMs.p50 ?? NaN),
        long_ttft_p99_ms: ms(long?.ttftMs.p99 ?? NaN),
        long_requests: long?.requests ?? 0,
        prefix_hit_rate: frac(r.overall.prefixHitRate),
        rejected_share: frac(r.overall.rejected / Math.max(1, r.overall.requests)),
        goodput_rps: frac(r.overall.throughputRps),
      });
    }
  }
  return rows;
}

const msText = (x: string | number) => (Number(x) >= 1000 ? `${(Number(x) / 1000).toFixed(2)} s` : `${Math.round(Number(x))} ms`);
const label = (valve: string | number) => (valve === 'kv' ? 'KV-usage valve' : 'token valve + score');

export const tokenLoad: Experiment = {
  name: 'token-load',
  letter: 'I',
  title: 'The token valve against the KV-usage valve',
  run(options: ExperimentOptions) {
    const requests = scaled(10_000, options);
    const rows = tokenLoadRows(options, requests);
    const plotRows = rows.map((r) => ({ ...r, valve: label(r.valve) }));
    const panel = (field: string, title: string) => ({
      width: 260,
      height: 200,
      mark: { type: 'bar' as const },
      encoding: {
        x: { field: 'rate', type: 'ordinal' as const, title: 'offered load (req/s)' },
        xOffset: { field: 'valve' },
        y: { field, type: 'quantitative' as const, title },
        color: { field: 'valve', type: 'nominal' as const, title: null, legend: { orient: 'bottom' as const } },
      },
    });
    const spec = {
      title: { text: `I. ${LONG_FRACTION * 100}% of prompts at 100k tokens among short ones (${REPLICAS} × 8B, prefix affinity)` },
      data: { values: plotRows },
      hconcat: [panel('short_ttft_p99_ms', 'short requests: TTFT p99 (ms)'), panel('long_ttft_p99_ms', '100k-token requests: TTFT p99 (ms)')],
    };
    const summary = [
      `${REPLICAS} replicas of the 8B profile (max_model_len 131,072), Poisson arrivals at ${RATES.join(' and ')} requests/s; ${LONG_FRACTION * 100}% of`,
      `requests are single ${LONG_TOKENS.toLocaleString('en-US')}-token prompts, the rest Azure-shaped conversations over 40 shared system prompts;`,
      `${requests} requests per run. Both chains are prefix-affinity (release_threshold 0.85) then power-of-two; the`,
      `token chain adds token_release_threshold 0.5 of full_prefill_tokens 65,536 and token_load 0.5 in the load score.`,
      '',
      markdownTable(rows, {
        load: (r) => `${r.rate}/s`,
        valve: (r) => label(r.valve),
        'short TTFT p50': (r) => msText(r.short_ttft_p50_ms),
        'short TTFT p99': (r) => msText(r.short_ttft_p99_ms),
        '100k TTFT p50': (r) => msText(r.long_ttft_p50_ms),
        '100k TTFT p99': (r) => msText(r.long_ttft_p99_ms),
        'prefix hits': (r) => `${(Number(r.prefix_hit_rate) * 100).toFixed(1)}%`,
        'done/s': (r) => Number(r.goodput_rps).toFixed(1),
      }),
    ].join('\n');
    return { rows, plots: [{ name: '', spec: spec as never }], summary };
  },
};
