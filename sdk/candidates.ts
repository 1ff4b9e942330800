import type { Candidate } from './types.ts';

// The router hands in-process strategies the same frozen candidate list for
// as long as no replica joins or leaves the pool, so whatever is derived from
// a list can be kept with it: a frozen array cannot change under the cache.
// A list that is not frozen (a copy a caller made, a caged plugin's) is
// indexed afresh on every call.
const positionsByList = new WeakMap<readonly Candidate[], ReadonlyMap<string, number>>();

/**
 * Each candidate's position in `candidates`, by id: find a replica a strategy
 * remembers without scanning the pool (`candidates[positions.get(id)]`).
 */
export function candidatePositions(candidates: readonly Candidate[]): ReadonlyMap<string, number> {
  let positions = positionsByList.get(candidates);
  if (positions === undefined) {
    const made = new Map<string, number>();
    for (let i = 0; i < candidates.length; i++) made.set(candidates[i].id, i);
    positions = made;
    if (Object.isFrozen(candidates)) positionsByList.set(candidates, positions);
  }
  return positions;
}
