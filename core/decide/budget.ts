// A strategy's pick budget: how its picks compare with the wall-clock budget
// of one pick. decide() only reads it (is the strategy suspended; would this
// overrun suspend it); commit() counts each pick into it. One per strategy
// slot, made when the snapshot is compiled.
//
// The budget is wall-clock, less what the router's thread is known to have
// waited for a CPU meanwhile (thread-wait.ts): a descheduled process is not
// the strategy's fault. One GC pause can still overrun it; discarding that
// answer would only make routing flap. A strategy that overruns repeatedly
// (3 times in its last 100 picks) is slow for real: it is skipped for 10 s,
// then tried again. Every overrun after an instance's first few picks is
// reported. What the thread waited is known only since a sample that may
// predate the pick, so an overrun the wait excused may have been the
// strategy's own: its next pick is then sampled exactly (`exactNext`), and
// judged on that.
const OVERRUNS_TO_SUSPEND = 3;
/** A fresh instance's first picks include compiling it (JIT): they are not held against it. */
const WARMUP_PICKS = 10;
const OVERRUN_WINDOW_PICKS = 100;
export const SUSPENSION_MS = 10_000;

export class PickBudget {
  private picks = 0;
  private overrunsAt: number[] = [];
  /** On the monotonic clock of DecideEnv. */
  suspendedUntil = 0;
  /** The last pick overran and waiting excused it: the chain samples the thread's wait right before the next one. */
  exactNext = false;

  /** Would a pick that took `elapsedMs` (`waitedMs` of it waiting for a CPU) now suspend the strategy? Changes nothing. */
  wouldSuspend(elapsedMs: number, waitedMs: number, budgetMs: number): boolean {
    if (!(elapsedMs - waitedMs > budgetMs) || this.picks + 1 <= WARMUP_PICKS) return false;
    const pick = this.picks + 1;
    let recent = 1;
    for (const at of this.overrunsAt) if (at > pick - OVERRUN_WINDOW_PICKS) recent++;
    return recent >= OVERRUNS_TO_SUSPEND;
  }

  /** Counts one pick; an overrun returns what to report, else undefined. */
  count(elapsedMs: number, waitedMs: number, budgetMs: number, clock: () => number): string | undefined {
    this.picks++;
    // A pick measured exactly (the flag was up when it ran) stands as measured.
    this.exactNext = !this.exactNext && elapsedMs > budgetMs && waitedMs > 0 && !(elapsedMs - waitedMs > budgetMs);
    if (!(elapsedMs - waitedMs > budgetMs) || this.picks <= WARMUP_PICKS) return undefined;
    const pick = this.picks;
    this.overrunsAt = this.overrunsAt.filter((at) => at > pick - OVERRUN_WINDOW_PICKS);
    this.overrunsAt.push(pick);
    const suspend = this.overrunsAt.length >= OVERRUNS_TO_SUSPEND;
    if (suspend) {
      this.suspendedUntil = clock() + SUSPENSION_MS;
      this.overrunsAt = [];
    }
    const waited = waitedMs > 0 ? `, ${waitedMs.toFixed(2)} ms of it waiting for a CPU` : '';
    return `pick took ${elapsedMs.toFixed(2)} ms (budget ${budgetMs} ms${waited})${suspend ? `; suspended for ${SUSPENSION_MS / 1000} s` : ''}`;
  }
}
