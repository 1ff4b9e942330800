// How long the router's thread has waited for a CPU: runnable, but another
// process (or thread) was running. A pick timed on the wall clock holds that
// wait too; on a loaded host a 2 µs pick can read 30 ms because the thread
// was descheduled in the middle of it, and holding that against the strategy
// suspends healthy ones (budget.ts). Linux keeps the figure per thread in
// /proc/thread-self/schedstat ("run-ns wait-ns timeslices"); elsewhere, or
// where procfs is hidden, there is none and every overrun counts.
//
// A read costs ~5 µs (a system call through fs.readSync), so it is not made
// around every pick: the chain samples it at most once per SAMPLE_EVERY_MS of
// the decision clock, and reads it again only after a pick overran. What the
// thread waited since the sample bounds what it waited during the pick from
// above, so an overrun is excused only as far as waiting can explain it; and
// since the wait may have come before the pick, a strategy excused that way
// has its next pick sampled exactly (budget.ts). A pick's clock starts after
// the sample is read: the read is a system call, where the kernel is apt to
// deschedule the thread, and that wait must fall inside what is measured.
import { closeSync, openSync, readSync } from 'node:fs';

const SCHEDSTAT = '/proc/thread-self/schedstat';
export const SAMPLE_EVERY_MS = 10;

export interface ThreadWait {
  /** Takes a sample at `now` (the decision clock) unless one was taken within SAMPLE_EVERY_MS, or always when `exact`; true if it read. */
  sample(now: number, exact?: boolean): boolean;
  /** Ms the thread waited for a CPU since the last sample (read afresh; it becomes the sample), or 0 when it cannot tell. */
  waitedSinceSample(now: number): number;
}

/** Reads a thread's cumulative wait (ms) from a schedstat file descriptor; NaN if unreadable. */
export type WaitReader = () => number;

/** The wait of the calling thread; undefined where the kernel does not say. Open it on the thread whose picks it times. */
export function openThreadWait(path = SCHEDSTAT): ThreadWait | undefined {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return undefined;
  }
  const buffer = Buffer.alloc(128);
  const read: WaitReader = () => {
    try {
      return parseWaitMs(buffer.toString('latin1', 0, readSync(fd, buffer, 0, buffer.length, 0)));
    } catch {
      return NaN;
    }
  };
  if (Number.isNaN(read())) {
    closeSync(fd);
    return undefined;
  }
  // The descriptor lives as long as the process: one per router, never reopened.
  return sampledWait(read);
}

/** The sampling over any reader (tests give their own). */
export function sampledWait(read: WaitReader): ThreadWait {
  let sampledAt = -Infinity;
  let sampledWait = NaN;
  return {
    sample(now, exact = false) {
      if (!exact && now - sampledAt < SAMPLE_EVERY_MS) return false;
      sampledAt = now;
      sampledWait = read();
      return true;
    },
    waitedSinceSample(now) {
      const waited = read();
      const since = waited - sampledWait;
      sampledAt = now;
      sampledWait = waited;
      return since > 0 ? since : 0;
    },
  };
}

/** The second field of "run-ns wait-ns timeslices\n", in ms; NaN unless it is a number. */
export function parseWaitMs(text: string): number {
  const first = text.indexOf(' ');
  const second = first < 0 ? -1 : text.indexOf(' ', first + 1);
  if (second < 0) return NaN;
  const ns = Number(text.slice(first + 1, second));
  return Number.isFinite(ns) && ns >= 0 ? ns / 1e6 : NaN;
}
