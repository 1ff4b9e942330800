// Which replicas changed, and in what order: a bounded ring of replica ids
// with a running count. A reader remembers the count it has seen and asks
// for the ids since; a reader that fell further behind than the ring holds is
// told so (undefined) and looks at every replica instead. This is what lets a
// decision in a large pool look only at the replicas whose state moved
// (docs/decide.md, "Cost in a large pool"), not at all of them.

/** Enough for many requests' worth of in-flight changes between two decisions in a quiet pool. */
export const CHANGE_LOG_SIZE = 4096;

export class ChangeLog {
  private readonly ids: (string | undefined)[];
  private total = 0;

  constructor(private readonly size = CHANGE_LOG_SIZE) {
    this.ids = new Array<string | undefined>(size);
  }

  /** Changes recorded so far. */
  get count(): number {
    return this.total;
  }

  record(id: string): void {
    this.ids[this.total % this.size] = id;
    this.total++;
  }

  /**
   * The ids recorded since `count` (oldest first, repeats kept), or undefined when the ring no longer holds them all.
   * Written into `into` when given (its length set), which a reader asking on every decision reuses: no array a call.
   */
  since(count: number, into?: string[]): string[] | undefined {
    if (count > this.total || this.total - count > this.size) return undefined;
    if (into === undefined) {
      const out = new Array<string>(this.total - count);
      for (let i = count; i < this.total; i++) out[i - count] = this.ids[i % this.size]!;
      return out;
    }
    into.length = 0;
    for (let i = count; i < this.total; i++) into.push(this.ids[i % this.size]!);
    return into;
  }
}
