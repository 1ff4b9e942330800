// A discrete-event clock for engine tests: time moves only when `run` pops the
// next scheduled event, so a test sees exact step times.
import type { Clock, TimerHandle } from '../../sim/clock.ts';

interface Event {
  at: number;
  order: number;
  fn: () => void;
  cancelled: boolean;
}

export class VirtualClock implements Clock {
  private time = 0;
  private order = 0;
  private readonly heap: Event[] = [];

  now(): number {
    return this.time;
  }

  schedule(delayMs: number, fn: () => void): TimerHandle {
    const event: Event = { at: this.time + Math.max(0, delayMs), order: this.order++, fn, cancelled: false };
    this.push(event);
    return { cancel: () => (event.cancelled = true) };
  }

  /** Runs events in time order until none is left or the next is after `until`. */
  run(until = Infinity): void {
    while (this.heap.length > 0 && this.heap[0].at <= until) {
      const event = this.pop();
      if (event.cancelled) continue;
      this.time = event.at;
      event.fn();
    }
    if (until !== Infinity && until > this.time) this.time = until;
  }

  private before(a: Event, b: Event): boolean {
    return a.at < b.at || (a.at === b.at && a.order < b.order);
  }

  private push(event: Event): void {
    const heap = this.heap;
    heap.push(event);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(heap[i], heap[parent])) break;
      [heap[i], heap[parent]] = [heap[parent], heap[i]];
      i = parent;
    }
  }

  private pop(): Event {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && this.before(heap[l], heap[m])) m = l;
        if (r < heap.length && this.before(heap[r], heap[m])) m = r;
        if (m === i) break;
        [heap[i], heap[m]] = [heap[m], heap[i]];
        i = m;
      }
    }
    return top;
  }
}
