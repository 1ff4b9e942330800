// The replicas of a pool as strategies see them: filters first (not ready,
// draining and failing replicas are excluded; ejected ones too, unless too
// little of the pool is left: panic), then load signals with their ages.
// Saturated replicas are marked, never dropped: excluding them would push
// their load onto the rest, which then saturate too (section 8).
import type { Candidate, LoadSignals } from '../../sdk/index.ts';
import type { FleetView, ReplicaState } from '../fleet/types.ts';
import type { Pool, ReplicaSpec } from '../policy/snapshot.ts';
import type { TraceAlternative } from './trace.ts';

export interface CandidateSet {
  readonly candidates: Candidate[];
  readonly excluded: readonly TraceAlternative[];
}

type MutableSignals = { -readonly [K in keyof LoadSignals]: LoadSignals[K] };

/**
 * One replica's candidate (or why it is excluded) as last built, and the
 * values it was built from: while the fleet reports the same values, the
 * candidate is reused and only its signals' age moves on. A pool's replicas
 * rarely all change between two requests; building every candidate afresh
 * was most of a decision's cost in a large pool.
 */
class ReplicaEntry {
  built = false;
  health: string | undefined;
  kvUsage: number | undefined;
  queueDepth: number | undefined;
  running: number | undefined;
  inFlight = 0;
  scrapedAt: number | undefined;
  loadedAdapters: readonly string[] | undefined;
  stale = false;
  candidate: Candidate | undefined;
  signals: MutableSignals | undefined;
  excluded: TraceAlternative | undefined;

  matches(state: ReplicaState | undefined, stale: boolean): boolean {
    return (
      this.built &&
      this.stale === stale &&
      this.health === state?.health &&
      this.inFlight === (state?.inFlight ?? 0) &&
      this.scrapedAt === state?.scrapedAt &&
      this.kvUsage === state?.kvUsage &&
      this.queueDepth === state?.queueDepth &&
      this.running === state?.running &&
      this.loadedAdapters === state?.loadedAdapters
    );
  }

  rebuild(spec: ReplicaSpec, pool: Pool, state: ReplicaState | undefined, now: number, maxStalenessMs: number, stale: boolean): void {
    this.built = true;
    this.health = state?.health;
    this.kvUsage = state?.kvUsage;
    this.queueDepth = state?.queueDepth;
    this.running = state?.running;
    this.inFlight = state?.inFlight ?? 0;
    this.scrapedAt = state?.scrapedAt;
    this.loadedAdapters = state?.loadedAdapters;
    this.stale = stale;
    const health = state?.health ?? 'unknown';
    if (spec.draining || health === 'not_ready' || health === 'failing' || health === 'draining') {
      this.excluded = { name: spec.id, note: spec.draining ? 'draining (policy)' : health.replace('_', ' ') };
      this.candidate = this.signals = undefined;
      return;
    }
    const signals = loadSignals(spec, state, now, maxStalenessMs) as MutableSignals;
    this.signals = signals;
    this.excluded = undefined;
    this.candidate = candidateWith(pool, spec, signals);
  }
}

/** A pool's candidates as last built, kept between requests (made with the snapshot, one per pool). */
export class CandidateCache {
  private readonly entries: ReplicaEntry[];
  private candidates: Candidate[] = [];
  private excluded: readonly TraceAlternative[] = [];

  constructor(replicas: number) {
    this.entries = Array.from({ length: replicas }, () => new ReplicaEntry());
  }

  /**
   * The candidates for the fleet's state now: rebuilt where it changed, the
   * list remade only then. Undefined while a replica is ejected: whether the
   * pool panics depends on all of them (buildCandidates decides afresh).
   */
  current(pool: Pool, fleet: FleetView, now: number, maxStalenessMs: number): CandidateSet | undefined {
    const replicas = pool.replicas;
    let changed = false;
    for (let i = 0; i < replicas.length; i++) {
      const spec = replicas[i];
      const entry = this.entries[i];
      const state = fleet.replica(spec.id);
      if (state?.health === 'ejected') {
        entry.built = false;
        return undefined;
      }
      const ageMs = state?.scrapedAt !== undefined ? Math.max(0, now - state.scrapedAt) : Infinity;
      const stale = ageMs > maxStalenessMs;
      if (entry.matches(state, stale)) {
        if (entry.signals) entry.signals.ageMs = ageMs;
        continue;
      }
      entry.rebuild(spec, pool, state, now, maxStalenessMs, stale);
      changed = true;
    }
    if (changed) {
      const candidates: Candidate[] = [];
      const excluded: TraceAlternative[] = [];
      for (const entry of this.entries) {
        if (entry.candidate) candidates.push(entry.candidate);
        else if (entry.excluded) excluded.push(entry.excluded);
      }
      this.candidates = candidates;
      this.excluded = excluded;
    }
    // A copy: a strategy may sort what it is given without reordering the next request's list.
    return { candidates: this.candidates.slice(), excluded: this.excluded };
  }
}

export function buildCandidates(
  pool: Pool,
  fleet: FleetView,
  now: number,
  maxStalenessMs: number,
  exclude?: ReadonlySet<string>,
): CandidateSet {
  if (exclude === undefined || exclude.size === 0) {
    const kept = pool.candidateCache.current(pool, fleet, now, maxStalenessMs);
    if (kept) return kept;
  }
  // A retry (without the replicas that failed it) or an ejection: built afresh.
  const candidates: Candidate[] = [];
  const excluded: TraceAlternative[] = [];
  let ejected: ReplicaSpec[] | undefined; // made only when a replica is ejected
  let unhealthy = 0;
  for (const spec of pool.replicas) {
    if (exclude?.has(spec.id)) {
      excluded.push({ name: spec.id, note: 'already failed this request' });
      continue;
    }
    if (spec.draining) {
      excluded.push({ name: spec.id, note: 'draining (policy)' });
      continue;
    }
    const state = fleet.replica(spec.id);
    const health = state?.health ?? 'unknown';
    if (health === 'ejected') {
      (ejected ??= []).push(spec);
      continue;
    }
    if (health === 'not_ready' || health === 'failing' || health === 'draining') {
      if (health === 'failing') unhealthy++;
      excluded.push({ name: spec.id, note: health.replace('_', ' ') });
      continue;
    }
    candidates.push(candidateOf(pool, spec, state, now, maxStalenessMs));
  }
  if (ejected) {
    // Panic (Envoy's idea): with too few healthy replicas left, sending to the
    // ejected ones beats rejecting everything. Failing, loading and draining
    // replicas never come back this way.
    const panic = candidates.length * 100 < pool.outlier.panicThresholdPercent * (candidates.length + ejected.length + unhealthy);
    for (const spec of ejected) {
      if (panic) candidates.push(candidateOf(pool, spec, fleet.replica(spec.id), now, maxStalenessMs));
      else excluded.push({ name: spec.id, note: 'ejected (failed requests in a row)' });
    }
  }
  return { candidates, excluded };
}

function candidateOf(pool: Pool, spec: ReplicaSpec, state: ReturnType<FleetView['replica']>, now: number, maxStalenessMs: number): Candidate {
  return candidateWith(pool, spec, loadSignals(spec, state, now, maxStalenessMs));
}

/** A replica as strategies see it, with its signals: saturated by the pool's thresholds. */
function candidateWith(pool: Pool, spec: ReplicaSpec, signals: Candidate['signals']): Candidate {
  return {
    id: spec.id,
    url: spec.url,
    engine: spec.engine,
    saturated: signals.kvUsage >= pool.saturation.kvUsage || signals.queueDepth >= pool.saturation.queueDepth,
    signals,
    capacity: spec.capacity,
  };
}

/**
 * Scraped signals while they are fresh; past max staleness the router's own
 * in-flight count stands in for them, since routing on old load data is worse
 * than random. Even fresh, the queue is at least what this router sent beyond
 * the engine's running batch since the last scrape.
 */
export function loadSignals(
  spec: ReplicaSpec,
  state: ReturnType<FleetView['replica']>,
  now: number,
  maxStalenessMs: number,
): LoadSignals {
  const inFlight = state?.inFlight ?? 0;
  const ageMs = state?.scrapedAt !== undefined ? Math.max(0, now - state.scrapedAt) : Infinity;
  const loadedAdapters = adaptersOf(spec, state?.loadedAdapters);
  if (ageMs > maxStalenessMs) {
    return {
      kvUsage: Math.min(1, inFlight / spec.maxNumSeqs),
      queueDepth: Math.max(0, inFlight - spec.maxNumSeqs),
      running: Math.min(inFlight, spec.maxNumSeqs),
      inFlight,
      loadedAdapters,
      ageMs,
      stale: true,
    };
  }
  const running = state!.running ?? 0;
  return {
    kvUsage: state!.kvUsage ?? 0,
    queueDepth: Math.max(state!.queueDepth ?? 0, inFlight - running),
    running,
    inFlight,
    loadedAdapters,
    ageMs,
    stale: false,
  };
}

/**
 * vLLM reports the adapters of its last step's requests, not all it holds:
 * an idle engine reports none. The policy's preloaded adapters stay counted.
 */
function adaptersOf(spec: ReplicaSpec, scraped: readonly string[] | undefined): readonly string[] {
  if (!scraped || scraped.length === 0) return spec.adapters;
  if (spec.adapters.length === 0) return scraped;
  return [...new Set([...spec.adapters, ...scraped])];
}
