// A small, bounded history of each replica's load, for the explorer's Fleet
// tab (docs/observability.md): one sample every few scrapes, the last 120 per
// replica (ten minutes at the default one-second scrape). Replicas gone from
// the fleet are forgotten at the next sample. Memory: replicas × 120 × 5 numbers.
import type { ReplicaReport } from './watched-replica.ts';

export const HISTORY_SAMPLES = 120;

/** One replica's recent samples, oldest first; null where the engine had not reported it. */
export interface ReplicaSeries {
  readonly id: string;
  readonly at: number[];
  readonly kvUsage: (number | null)[];
  readonly queue: (number | null)[];
  readonly inFlight: number[];
  readonly hitRate: (number | null)[];
}

export class ReplicaHistory {
  private readonly series = new Map<string, ReplicaSeries>();

  constructor(readonly intervalMs: number) {}

  /** Adds one sample of every replica in `reports`; drops the series of replicas no longer listed. */
  record(now: number, reports: readonly ReplicaReport[]): void {
    const seen = new Set<string>();
    for (const r of reports) {
      seen.add(r.id);
      let s = this.series.get(r.id);
      if (!s) this.series.set(r.id, (s = { id: r.id, at: [], kvUsage: [], queue: [], inFlight: [], hitRate: [] }));
      s.at.push(now);
      s.kvUsage.push(r.kvUsage);
      s.queue.push(r.queueDepth);
      s.inFlight.push(r.inFlight);
      s.hitRate.push(r.prefixCacheHitRatio);
      if (s.at.length > HISTORY_SAMPLES) for (const list of [s.at, s.kvUsage, s.queue, s.inFlight, s.hitRate]) list.shift();
    }
    for (const id of this.series.keys()) if (!seen.has(id)) this.series.delete(id);
  }

  /** What /admin/fleet/history answers. */
  json(): { intervalMs: number; samples: number; replicas: ReplicaSeries[] } {
    return { intervalMs: this.intervalMs, samples: HISTORY_SAMPLES, replicas: [...this.series.values()] };
  }
}
