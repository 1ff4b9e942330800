// What a decision may depend on besides its inputs: the clock, a random
// source and quota state. Injected, so the same inputs give the same decision.
import { seededRandom } from '../../sdk/index.ts';
import { MemoryQuotaStore, type QuotaStore } from './quota.ts';

export interface DecideEnv {
  readonly now: () => number;
  /** In [0, 1): used where a request has no conversation to be sticky by. */
  readonly random: () => number;
  readonly quota: QuotaStore;
}

export function createEnv(options: { seed?: number | string; now?: () => number; quota?: QuotaStore } = {}): DecideEnv {
  return {
    now: options.now ?? Date.now,
    random: seededRandom(options.seed ?? 1),
    quota: options.quota ?? new MemoryQuotaStore(),
  };
}
