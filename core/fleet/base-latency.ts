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

class Residuals {
  private readonly values = new Float64Array(SAMPLES);
  private count = 0;
  private next = 0;
  private base: number | undefined;

  add(ms: number): void {
    this.values[this.next] = ms;
    this.next = (this.next + 1) % SAMPLES;
    if (this.count < SAMPLES) this.count++;
    this.base = undefined;
  }

  low(): number | undefined {
    if (this.count < MIN_SAMPLES) return undefined;
    if (this.base === undefined) {
      const sorted = this.values.slice(0, this.count).sort();
      this.base = sorted[Math.floor((sorted.length - 1) * PERCENTILE)];
    }
    return this.base;
  }
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
