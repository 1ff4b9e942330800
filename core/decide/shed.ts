// Shedding that never queues (docs/policies.md, "Shedding"): as a pool's
// candidates fill up, requests of negative priority are refused with a
// probability that rises steeply with the pool's saturation, so that the
// engines' queues hold the work that matters. Priority >= 0 is never shed:
// it is refused only when every replica is at capacity (admit.ts). The draw
// comes from the injected random source, so decide() stays repeatable.
import type { Candidate } from '../../sdk/index.ts';
import { rejection, type Rejection } from '../errors.ts';
import type { Pool, SheddingSettings } from './generation.ts';

export { SHEDDING_DEFAULTS, type SheddingSettings } from './generation.ts';

/**
 * How full the pool's candidates are, 0..1: the mean of each engine's queue
 * over the pool's capacity queue_depth (1: every replica at capacity, where
 * everyone is refused).
 */
export function poolSaturation(pool: Pool, candidates: readonly Candidate[]): number {
  if (candidates.length === 0) return 0;
  const full = pool.capacity.queueDepth;
  let sum = 0;
  for (const c of candidates) sum += Math.min(1, c.signals.queueDepth / full);
  return sum / candidates.length;
}

export function shedProbability(shedding: SheddingSettings, saturation: number, priority: number): number {
  if (priority >= 0 || shedding.mode === 'off' || saturation <= 0) return 0;
  return Math.min(1, saturation ** shedding.exponent * shedding.scale * -priority);
}

export interface ShedVerdict {
  readonly saturation: number;
  readonly probability: number;
  /** Set when the request is shed. */
  readonly rejection?: Rejection;
}

/** Draws from `random` only when the outcome is uncertain (0 < p < 1): other requests leave the random sequence as it was. */
export function shed(pool: Pool, candidates: readonly Candidate[], priority: number, random: () => number): ShedVerdict {
  if (priority >= 0 || pool.shedding.mode === 'off') return NOT_SHED;
  const saturation = poolSaturation(pool, candidates);
  const probability = shedProbability(pool.shedding, saturation, priority);
  if (probability === 0 || (probability < 1 && random() >= probability)) return { saturation, probability };
  const percent = Math.round(saturation * 100);
  return {
    saturation,
    probability,
    rejection: rejection(
      'shed_for_priority',
      `Pool ${pool.name} (${pool.model}@${pool.version}) is ${percent}% saturated and sheds requests of negative priority first; this one had priority ${priority}. Retry after ${pool.capacity.retryAfterS} s, or at a quieter time.`,
      { retryAfterS: pool.capacity.retryAfterS },
    ),
  };
}

const NOT_SHED: ShedVerdict = Object.freeze({ saturation: 0, probability: 0 });
