// Percentiles in fixed memory: a histogram with logarithmic buckets, each
// 1% wider than the last, from 1 µs to ~30 hours (in ms). A quantile is read
// as its bucket's geometric midpoint, so it is within 0.5% of the exact
// order statistic; memory is the same for ten requests or ten million.

const MIN = 1e-3;
const GROWTH = 1.01;
const LOG_GROWTH = Math.log(GROWTH);
const BUCKETS = Math.ceil(Math.log(1e8 / MIN) / LOG_GROWTH) + 2;

export class LogHistogram {
  private readonly counts = new Float64Array(BUCKETS);
  private n = 0;
  private sum = 0;
  private low = Infinity;
  private high = -Infinity;

  get count(): number {
    return this.n;
  }

  get mean(): number {
    return this.n === 0 ? NaN : this.sum / this.n;
  }

  get min(): number {
    return this.n === 0 ? NaN : this.low;
  }

  get max(): number {
    return this.n === 0 ? NaN : this.high;
  }

  record(value: number): void {
    this.recordIn(value, bucketOf(value));
  }

  /** record(value), its bucket (bucketOf(value)) found by the caller: once for a value that several histograms record. */
  recordIn(value: number, bucket: number): void {
    if (!(value >= 0)) return; // NaN and negatives carry nothing
    this.n++;
    this.sum += value;
    if (value < this.low) this.low = value;
    if (value > this.high) this.high = value;
    this.counts[bucket]++;
  }

  /** The q-quantile (0..1), NaN when empty; exact at the extremes. */
  quantile(q: number): number {
    if (this.n === 0) return NaN;
    if (q <= 0) return this.low;
    if (q >= 1) return this.high;
    // The smallest value with at least ceil(q·n) values at or below it (nearest rank).
    const rank = Math.max(1, Math.ceil(q * this.n));
    let seen = 0;
    const counts = this.counts;
    for (let i = 0; i < BUCKETS; i++) {
      seen += counts[i];
      if (seen >= rank) return Math.min(this.high, Math.max(this.low, midpoint(i)));
    }
    return this.high;
  }

  merge(other: LogHistogram): void {
    for (let i = 0; i < BUCKETS; i++) this.counts[i] += other.counts[i];
    this.n += other.n;
    this.sum += other.sum;
    if (other.low < this.low) this.low = other.low;
    if (other.high > this.high) this.high = other.high;
  }
}

/** The bucket `value` counts in (any number: NaN and negatives, which no histogram records, give some bucket). */
export function bucketOf(value: number): number {
  if (value <= MIN) return 0;
  const i = Math.floor(Math.log(value / MIN) / LOG_GROWTH) + 1;
  return i < BUCKETS ? i : BUCKETS - 1;
}

function midpoint(bucket: number): number {
  if (bucket === 0) return MIN;
  return MIN * Math.pow(GROWTH, bucket - 0.5);
}
