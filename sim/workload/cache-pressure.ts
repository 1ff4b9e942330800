// The cache-pressured workload of docs/experiments.md (routing quality with
// one and three routers): conversations over a library of shared documents
// of ~3k tokens with Zipf 0.8 popularity, 2–4 turns each, so that the
// documents together hold several times the fleet's KV cache and caches
// evict. One definition for the simulator and bench:fleet.
import type { WorkloadSpec } from './load.ts';

export interface CachePressureOptions {
  /** Conversations started (the run: 4,000). */
  readonly conversations: number;
  /** Requests a second, follow-up turns included (22). */
  readonly rate: number;
  /** Mean think time between a conversation's turns, seconds (0.5 or 10). */
  readonly thinkS: number;
  /** Documents in the library (1,000). */
  readonly documents: number;
}

export const CACHE_PRESSURE_DEFAULTS: CachePressureOptions = { conversations: 4000, rate: 22, thinkS: 0.5, documents: 1000 };

/** 2, 3 or 4 turns, each as likely: 3 on average. */
export const MEAN_TURNS = 3;

export function cachePressureWorkload(options: CachePressureOptions): WorkloadSpec {
  return {
    kind: 'workload',
    requests: options.conversations * MEAN_TURNS,
    arrivals: { process: 'poisson', rate: options.rate },
    // The first turn: the document and a question on it.
    prompt_tokens: { type: 'lognormal', median: 3200, p99: 4200 },
    output_tokens: { type: 'lognormal', median: 150, p99: 600 },
    sessions: {
      fraction: 1,
      turns: {
        type: 'quantiles',
        points: [
          [0, 2],
          [0.3333, 2],
          [0.3334, 3],
          [0.6666, 3],
          [0.6667, 4],
          [1, 4],
        ],
      },
      think_time_s: { type: 'exponential', mean: options.thinkS },
      max_context_tokens: 16_000,
    },
    system_prompts: { count: options.documents, zipf: 0.8, tokens: { type: 'uniform', min: 2500, max: 3500 } },
  };
}
