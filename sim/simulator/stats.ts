// Results of a simulation, per group of requests (overall, per pool, per
// tenant, per request class), in memory that does not grow with the number
// of requests: counters and log histograms.
import { bucketOf, LogHistogram } from './log-histogram.ts';

export interface Percentiles {
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly mean: number;
  readonly max: number;
}

export interface GroupSummary {
  /** Requests decided (admitted or rejected). */
  readonly requests: number;
  readonly completed: number;
  readonly rejected: number;
  readonly rejections: Readonly<Record<string, number>>;
  /** Time to first token, ms. */
  readonly ttftMs: Percentiles;
  /** Arrival to last token, ms. */
  readonly e2eMs: Percentiles;
  /** Time per output token after the first, ms. */
  readonly tpotMs: Percentiles;
  /** Completed requests per second, first arrival to last completion. */
  readonly throughputRps: number;
  readonly outputTokensPerS: number;
  /** Prompt tokens served from the prefix cache / prompt tokens, over completed requests. */
  readonly prefixHitRate: number;
  readonly promptTokens: number;
  readonly outputTokens: number;
  /** Preemptions (recomputes) suffered by this group's requests. */
  readonly preemptions: number;
  /** Mean distinct LoRA adapters per engine step; for the fleet and for pools only. */
  distinctAdaptersPerBatch?: number;
  /** Mean requests per engine step; for the fleet and for pools only. */
  meanBatchSize?: number;
}

function percentiles(h: LogHistogram): Percentiles {
  return { p50: h.quantile(0.5), p90: h.quantile(0.9), p99: h.quantile(0.99), mean: h.mean, max: h.max };
}

export class GroupStats {
  requests = 0;
  completed = 0;
  rejected = 0;
  readonly rejections = new Map<string, number>();
  readonly ttft = new LogHistogram();
  readonly e2e = new LogHistogram();
  readonly tpot = new LogHistogram();
  promptTokens = 0;
  cachedTokens = 0;
  outputTokens = 0;
  preemptions = 0;
  firstArrival = Infinity;
  lastFinish = -Infinity;

  arrival(at: number): void {
    this.requests++;
    if (at < this.firstArrival) this.firstArrival = at;
  }

  rejection(code: string): void {
    this.rejected++;
    this.rejections.set(code, (this.rejections.get(code) ?? 0) + 1);
  }

  /** One completed request's figures, each time with its histogram bucket (see recordCompletion). */
  completion(
    ttft: number,
    ttftBucket: number,
    e2e: number,
    e2eBucket: number,
    tpot: number,
    tpotBucket: number,
    finishedAt: number,
    promptTokens: number,
    cachedTokens: number,
    outputTokens: number,
    preempted: number,
  ): void {
    this.completed++;
    this.ttft.recordIn(ttft, ttftBucket);
    this.e2e.recordIn(e2e, e2eBucket);
    this.tpot.recordIn(tpot, tpotBucket);
    this.promptTokens += promptTokens;
    this.cachedTokens += cachedTokens;
    this.outputTokens += outputTokens;
    this.preemptions += preempted;
    if (finishedAt > this.lastFinish) this.lastFinish = finishedAt;
  }

  summary(): GroupSummary {
    const spanS = (this.lastFinish - this.firstArrival) / 1000;
    return {
      requests: this.requests,
      completed: this.completed,
      rejected: this.rejected,
      rejections: Object.fromEntries([...this.rejections].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))),
      ttftMs: percentiles(this.ttft),
      e2eMs: percentiles(this.e2e),
      tpotMs: percentiles(this.tpot),
      throughputRps: spanS > 0 ? this.completed / spanS : 0,
      outputTokensPerS: spanS > 0 ? this.outputTokens / spanS : 0,
      prefixHitRate: this.promptTokens > 0 ? this.cachedTokens / this.promptTokens : 0,
      promptTokens: this.promptTokens,
      outputTokens: this.outputTokens,
      preemptions: this.preemptions,
    };
  }
}

/**
 * Records a completed request in every group it belongs to (overall, its pool, tenant, class and
 * priority), each time's bucket found once (a logarithm) rather than once a group.
 */
export function recordCompletion(
  groups: readonly GroupStats[],
  arrivedAt: number,
  firstTokenAt: number,
  finishedAt: number,
  promptTokens: number,
  cachedTokens: number,
  outputTokens: number,
  preempted: number,
): void {
  const ttft = firstTokenAt - arrivedAt;
  const e2e = finishedAt - arrivedAt;
  // No time per output token with a single token: NaN, which no histogram records.
  const tpot = outputTokens > 1 ? (finishedAt - firstTokenAt) / (outputTokens - 1) : NaN;
  const ttftBucket = bucketOf(ttft);
  const e2eBucket = bucketOf(e2e);
  const tpotBucket = bucketOf(tpot);
  for (const g of groups) g.completion(ttft, ttftBucket, e2e, e2eBucket, tpot, tpotBucket, finishedAt, promptTokens, cachedTokens, outputTokens, preempted);
}

/** Stats per group: created on first use, so only groups that occur appear. */
export class GroupedStats {
  readonly groups = new Map<string, GroupStats>();

  get(key: string): GroupStats {
    let stats = this.groups.get(key);
    if (!stats) this.groups.set(key, (stats = new GroupStats()));
    return stats;
  }

  summaries(): Record<string, GroupSummary> {
    return Object.fromEntries([...this.groups].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([k, v]) => [k, v.summary()]));
  }
}
