// A pool's base latency, as the router observes it: what a stream's first
// token takes beyond what the wait estimate (queue and prefill,
// core/decide/admit.ts) accounts for — the engine's fixed cost per request
// (scheduling, sampling, network). Learned from streams only: without
// streaming the first byte comes with the whole answer. The deadline check
// adds it to its estimate (docs/policies.md, "The checks"). No I/O, no timers.

/** Residuals kept per pool: the last minute or so of streams. */
const SAMPLES = 64;
/** Fewer residuals than this in a pool: no observed base yet (the policy's wait_estimate.base_ms stands alone). */
const MIN_SAMPLES = 3;
/** The base is this low percentile of the residuals: the latency even an unloaded engine adds, not a slow outlier. */
const PERCENTILE = 0.1;
/** Pools tracked at most (reloads rename pools; the oldest is forgotten). */
const MAX_POOLS = 1024;
/** A residual beyond this is a stall, not a base latency: clamped. */
const MAX_RESIDUAL_MS = 600_000;

/**
 * The last SAMPLES residuals, and the same values kept sorted: every
 * decision reads the low percentile and every stream adds a residual, so a
 * sort per read was a sort per request. Each add moves the sorted window by
 * one value instead (a binary search and a shift of at most 64 numbers).
 */
class Residuals {
  private readonly values = new Float64Array(SAMPLES);
  private readonly sorted = new Float64Array(SAMPLES);
  private count = 0;
  private next = 0;

  add(ms: number): void {
    const { sorted } = this;
    if (this.count === SAMPLES) {
      // The oldest value leaves the sorted window: any copy of an equal value will do.
      const at = lowerBound(sorted, this.count, this.values[this.next]);
      sorted.copyWithin(at, at + 1, this.count);
      this.count--;
    }
    const at = lowerBound(sorted, this.count, ms);
    sorted.copyWithin(at + 1, at, this.count);
    sorted[at] = ms;
    this.count++;
    this.values[this.next] = ms;
    this.next = (this.next + 1) % SAMPLES;
  }

  low(): number | undefined {
    if (this.count < MIN_SAMPLES) return undefined;
    return this.sorted[Math.floor((this.count - 1) * PERCENTILE)];
  }
}

/** The first index of sorted[0, count) whose value is not below `value`. */
function lowerBound(sorted: Float64Array, count: number, value: number): number {
  let lo = 0;
  let hi = count;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid] < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export class BaseLatency {
  private readonly pools = new Map<string, Residuals>();

  /**
   * A stream's first token came `firstTokenMs` after it was sent, where the
   * wait estimate (without any observed base) said `estimatedMs`.
   */
  record(pool: string, firstTokenMs: number, estimatedMs: number): void {
    if (!Number.isFinite(firstTokenMs) || !Number.isFinite(estimatedMs)) return;
    let residuals = this.pools.get(pool);
    if (!residuals) {
      if (this.pools.size >= MAX_POOLS) this.pools.delete(this.pools.keys().next().value!);
      this.pools.set(pool, (residuals = new Residuals()));
    }
    residuals.add(Math.min(MAX_RESIDUAL_MS, Math.max(0, firstTokenMs - estimatedMs)));
  }

  /** The pool's observed base latency in ms, or undefined until it served a few streams. */
  baseMs(pool: string): number | undefined {
    return this.pools.get(pool)?.low();
  }
}
