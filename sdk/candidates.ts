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

// A kept candidate's adapters change in place (a scrape) while its list stays
// the same. For the lists it keeps, the router says when (adaptersChanged);
// only those lists keep an index of which candidates hold which adapter.
const adapterIndexes = new WeakMap<readonly Candidate[], { byAdapter: Map<string, readonly number[]> | undefined }>();
const NONE: readonly number[] = Object.freeze([]);

/** For the router: it reports every change of a candidate's adapters in `list` (adaptersChanged) for as long as it hands the list out. */
export function keepAdapterIndex(list: readonly Candidate[]): void {
  adapterIndexes.set(list, { byAdapter: undefined });
}

/** For the router: a candidate of `list` reports other adapters now. */
export function adaptersChanged(list: readonly Candidate[]): void {
  const kept = adapterIndexes.get(list);
  if (kept !== undefined) kept.byAdapter = undefined;
}

/**
 * The positions, in order, of the candidates that report `adapter` loaded.
 * Kept with a list the router keeps (it says when adapters change), so a
 * large pool is not walked on every request; any other list is walked.
 */
export function adapterPositions(candidates: readonly Candidate[], adapter: string): readonly number[] {
  const kept = adapterIndexes.get(candidates);
  if (kept === undefined) {
    const positions: number[] = [];
    for (let i = 0; i < candidates.length; i++) if (candidates[i].signals.loadedAdapters.includes(adapter)) positions.push(i);
    return positions;
  }
  if (kept.byAdapter === undefined) {
    const byAdapter = new Map<string, number[]>();
    for (let i = 0; i < candidates.length; i++) {
      for (const name of candidates[i].signals.loadedAdapters) {
        const positions = byAdapter.get(name);
        // An adapter listed twice by one replica counts once.
        if (positions === undefined) byAdapter.set(name, [i]);
        else if (positions[positions.length - 1] !== i) positions.push(i);
      }
    }
    kept.byAdapter = byAdapter;
  }
  return kept.byAdapter.get(adapter) ?? NONE;
}
