// A fixed-bucket histogram in Prometheus's cumulative form.
import type { Labels, Sample } from './exposition.ts';

/** vLLM's buckets for vllm:time_to_first_token_seconds (SGLang uses the same). */
export const TTFT_BUCKETS_SECONDS: readonly number[] = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];

export class Histogram {
  readonly buckets: readonly number[];
  private readonly counts: number[];
  private sum = 0;
  private count = 0;

  constructor(buckets: readonly number[]) {
    this.buckets = buckets;
    this.counts = new Array<number>(buckets.length).fill(0);
  }

  observe(value: number): void {
    this.sum += value;
    this.count++;
    for (let i = 0; i < this.buckets.length; i++) {
      if (value <= this.buckets[i]) {
        this.counts[i]++;
        break;
      }
    }
  }

  get observations(): number {
    return this.count;
  }

  /** _bucket samples (cumulative, ending with le="+Inf"), then _sum and _count. */
  samples(labels: Labels): Sample[] {
    const out: Sample[] = [];
    let cumulative = 0;
    for (let i = 0; i < this.buckets.length; i++) {
      cumulative += this.counts[i];
      out.push({ suffix: '_bucket', labels: { ...labels, le: pythonFloat(this.buckets[i]) }, value: cumulative });
    }
    out.push({ suffix: '_bucket', labels: { ...labels, le: '+Inf' }, value: this.count });
    out.push({ suffix: '_sum', labels, value: this.sum });
    out.push({ suffix: '_count', labels, value: this.count });
    return out;
  }
}

/** Bucket bounds as prometheus_client writes them ("1.0", not "1"), for byte-for-byte familiar output. */
function pythonFloat(value: number): string {
  return Number.isInteger(value) ? value.toFixed(1) : String(value);
}
