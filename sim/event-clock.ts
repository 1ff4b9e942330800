// Virtual time for the simulator: a discrete-event clock over a binary heap.
// Time moves only when `run` takes the next event, so a simulated hour costs
// what its events cost. Events at the same time run in the order they were
// scheduled, which keeps a seeded run reproducible.
import type { Clock, TimerHandle } from './clock.ts';

class Timer implements TimerHandle {
  at: number;
  order: number;
  fn: (() => void) | undefined;

  constructor(at: number, order: number, fn: () => void) {
    this.at = at;
    this.order = order;
    this.fn = fn;
  }

  cancel(): void {
    this.fn = undefined;
  }
}

/** Thrown when events keep coming without time moving on: a model that cannot make progress. */
export class StalledClockError extends Error {}

export class EventClock implements Clock {
  private time = 0;
  private order = 0;
  private readonly heap: Timer[] = [];
  private executed = 0;

  /**
   * @param maxEventsWithoutProgress events allowed at one instant before `run`
   *   gives up with a StalledClockError, instead of spinning forever.
   */
  constructor(private readonly maxEventsWithoutProgress = 5_000_000) {}

  now(): number {
    return this.time;
  }

  /** Events run so far. */
  get events(): number {
    return this.executed;
  }

  /** Events waiting, cancelled ones included. */
  get pending(): number {
    return this.heap.length;
  }

  schedule(delayMs: number, fn: () => void): TimerHandle {
    return this.push(new Timer(delayMs > 0 ? this.time + delayMs : this.time, this.order++, fn));
  }

  /** Runs `fn` at absolute virtual time `at` (now, if `at` has passed). */
  at(at: number, fn: () => void): TimerHandle {
    return this.push(new Timer(at > this.time ? at : this.time, this.order++, fn));
  }

  /**
   * Runs events in time order until none is left, or the next one is after
   * `until` (time then stands at `until`). Returns the number of events run.
   */
  run(until = Infinity): number {
    const heap = this.heap;
    const start = this.executed;
    let sameInstant = 0;
    while (heap.length > 0) {
      const top = heap[0];
      if (top.at > until) break;
      this.pop();
      const fn = top.fn;
      if (fn === undefined) continue;
      top.fn = undefined;
      if (top.at !== this.time) {
        this.time = top.at;
        sameInstant = 0;
      } else if (++sameInstant > this.maxEventsWithoutProgress) {
        throw new StalledClockError(`virtual time is stuck at ${this.time.toFixed(3)} ms: ${sameInstant} events ran without it moving on`);
      }
      this.executed++;
      fn();
    }
    if (until !== Infinity && until > this.time) this.time = until;
    return this.executed - start;
  }

  private push(timer: Timer): Timer {
    const heap = this.heap;
    let i = heap.length;
    heap.push(timer);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = heap[parent];
      if (p.at < timer.at || (p.at === timer.at && p.order < timer.order)) break;
      heap[i] = p;
      i = parent;
    }
    heap[i] = timer;
    return timer;
  }

  private pop(): void {
    const heap = this.heap;
    const last = heap.pop()!;
    const n = heap.length;
    if (n === 0) return;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      let c = l;
      let child = heap[l];
      if (r < n) {
        const right = heap[r];
        if (right.at < child.at || (right.at === child.at && right.order < child.order)) {
          c = r;
          child = right;
        }
      }
      if (last.at < child.at || (last.at === child.at && last.order < child.order)) break;
      heap[i] = child;
      i = c;
    }
    heap[i] = last;
  }
}
