// Virtual time for the simulator: a discrete-event clock over a binary heap.
// Time moves only when `run` takes the next event, so a simulated hour costs
// what its events cost. Events at the same time run in the order they were
// scheduled, which keeps a seeded run reproducible.
import type { Clock, TimerHandle } from './clock.ts';

class Timer implements TimerHandle {
  fn: (() => void) | undefined;

  constructor(fn: () => void) {
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
  // The heap: timers[i] is due at ats[i], scheduled as number orders[i]. The keys sit in typed
  // arrays beside the timers so that a sift compares numbers in two arrays instead of reading
  // a timer object (one cache miss each, once a run's timers outnumber the CPU's caches) per level.
  private readonly timers: Timer[] = [];
  private ats = new Float64Array(256);
  private orders = new Float64Array(256);
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
    return this.timers.length;
  }

  schedule(delayMs: number, fn: () => void): TimerHandle {
    return this.push(delayMs > 0 ? this.time + delayMs : this.time, new Timer(fn));
  }

  /** Runs `fn` at absolute virtual time `at` (now, if `at` has passed). */
  at(at: number, fn: () => void): TimerHandle {
    return this.push(at > this.time ? at : this.time, new Timer(fn));
  }

  /**
   * Runs events in time order until none is left, or the next one is after
   * `until` (time then stands at `until`). Returns the number of events run.
   */
  run(until = Infinity): number {
    const timers = this.timers;
    const start = this.executed;
    let sameInstant = 0;
    while (timers.length > 0) {
      const at = this.ats[0];
      if (at > until) break;
      const top = timers[0];
      this.pop();
      const fn = top.fn;
      if (fn === undefined) continue;
      top.fn = undefined;
      if (at !== this.time) {
        this.time = at;
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

  private push(at: number, timer: Timer): Timer {
    const timers = this.timers;
    const order = this.order++;
    let i = timers.length;
    if (i === this.ats.length) this.grow();
    const ats = this.ats;
    const orders = this.orders;
    timers.push(timer);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const pa = ats[parent];
      if (pa < at || (pa === at && orders[parent] < order)) break;
      timers[i] = timers[parent];
      ats[i] = pa;
      orders[i] = orders[parent];
      i = parent;
    }
    timers[i] = timer;
    ats[i] = at;
    orders[i] = order;
    return timer;
  }

  /** Takes the top off the heap. */
  private pop(): void {
    const timers = this.timers;
    const ats = this.ats;
    const orders = this.orders;
    const last = timers.pop()!;
    const n = timers.length;
    if (n === 0) return;
    const lastAt = ats[n];
    const lastOrder = orders[n];
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      let c = l;
      let childAt = ats[l];
      if (r < n) {
        const rightAt = ats[r];
        if (rightAt < childAt || (rightAt === childAt && orders[r] < orders[l])) {
          c = r;
          childAt = rightAt;
        }
      }
      if (lastAt < childAt || (lastAt === childAt && lastOrder < orders[c])) break;
      timers[i] = timers[c];
      ats[i] = childAt;
      orders[i] = orders[c];
      i = c;
    }
    timers[i] = last;
    ats[i] = lastAt;
    orders[i] = lastOrder;
  }

  /** Doubles the key arrays' capacity. */
  private grow(): void {
    const ats = new Float64Array(this.ats.length * 2);
    ats.set(this.ats);
    this.ats = ats;
    const orders = new Float64Array(this.orders.length * 2);
    orders.set(this.orders);
    this.orders = orders;
  }
}
