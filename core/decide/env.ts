// What a decision may depend on besides its inputs: the clocks, a random
// source and quota state. Injected, so the same inputs give the same
// decision: decide() reads no other clock, and changes no state but the
// random source's position.
import { performance } from 'node:perf_hooks';
import { seededRandom } from '../../sdk/index.ts';
import { MemoryQuotaStore, type QuotaStore } from './quota.ts';
import { openThreadWait, type ThreadWait } from './thread-wait.ts';

export interface DecideEnv {
  /** Wall-clock ms (scrape ages, quota refills). */
  readonly now: () => number;
  /** Monotonic ms, for timing strategies' picks against their budget. */
  readonly clock: () => number;
  /** What the deciding thread waited for a CPU, taken out of an overrunning pick's time; absent where unknown. */
  readonly threadWait?: ThreadWait;
  /** In [0, 1): used where a request has no conversation to be sticky by. */
  readonly random: () => number;
  /** Read by decide(), taken from by commit(). */
  readonly quota: QuotaStore;
  /**
   * A pool's (by key) observed base latency in ms: what first tokens take
   * beyond the wait estimate (core/fleet/base-latency.ts); undefined, or
   * absent (explain, the simulator), where none was observed.
   */
  readonly baseLatencyMs?: (pool: string) => number | undefined;
}

export function createEnv(
  options: { seed?: number | string; now?: () => number; clock?: () => number; quota?: QuotaStore; threadWait?: ThreadWait } = {},
): DecideEnv {
  return {
    now: options.now ?? Date.now,
    clock: options.clock ?? monotonicMs,
    // Only the real clock times real waits: an injected clock (tests, the simulator) has no thread behind it.
    threadWait: options.threadWait ?? (options.clock ? undefined : sharedThreadWait()),
    random: seededRandom(options.seed ?? 1),
    quota: options.quota ?? new MemoryQuotaStore(),
  };
}

// node:perf_hooks' object: the global `performance` is a getter, run on every read.
function monotonicMs(): number {
  return performance.now();
}

let opened: ThreadWait | undefined | null = null;
/** One reader for the process's main thread (where envs are made), opened on first use. */
function sharedThreadWait(): ThreadWait | undefined {
  if (opened === null) opened = openThreadWait();
  return opened;
}
