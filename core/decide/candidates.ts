// The replicas of a pool as strategies see them: filters first (not ready,
// draining and failing replicas are excluded; ejected ones too, unless too
// little of the pool is left: panic), then load signals with their ages.
// Saturated replicas are marked, never dropped: excluding them would push
// their load onto the rest, which then saturate too (docs/design.md).
import type { Candidate, LoadSignals, ReplicaCapacity } from '../../sdk/index.ts';
import { adaptersChanged, keepAdapterIndex } from '../../sdk/candidates.ts';
import type { Engine } from '../../sdk/types.ts';
import type { FleetView, ReplicaState } from '../fleet/types.ts';
import { DEFAULT_FULL_PREFILL_TOKENS, type Pool, type ReplicaSpec } from './generation.ts';
import type { TraceAlternative } from './trace.ts';

export { DEFAULT_FULL_PREFILL_TOKENS } from './generation.ts';

export interface CandidateSet {
  readonly candidates: readonly Candidate[];
  readonly excluded: readonly TraceAlternative[];
  /** How many of the candidates are saturated. */
  readonly saturated: number;
  /**
   * The candidates without the saturated ones, when some are: a kept list
   * (frozen, the same array until a replica's saturation or the list
   * changes), so that what strategies key by a list survives a saturated
   * replica. Absent from a list built afresh (a retry): filter it then.
   */
  readonly unsaturated?: readonly Candidate[];
}

type MutableSignals = { -readonly [K in keyof LoadSignals]: LoadSignals[K] };

/** Why a replica takes no requests (a trace note), 'ejected' (maybe back in a panic), or undefined: a candidate. */
function exclusion(spec: ReplicaSpec, state: ReplicaState | undefined): string | undefined {
  if (spec.draining) return 'draining (policy)';
  const health = state?.health ?? 'unknown';
  if (health === 'ejected') return 'ejected';
  if (health === 'not_ready' || health === 'failing' || health === 'draining') return health.replace('_', ' ');
  return undefined;
}

/**
 * Panic (Envoy's idea): with too few healthy replicas left, sending to the
 * ejected ones beats rejecting everything. Failing, loading and draining
 * replicas never come back this way.
 */
function panics(pool: Pool, candidates: number, ejected: number, failing: number): boolean {
  return ejected > 0 && candidates * 100 < pool.outlier.panicThresholdPercent * (candidates + ejected + failing);
}

/**
 * Signals whose age is read when asked: the pool's kept candidates are not
 * all touched on every decision, so the age is worked out from the scrape
 * time and the clock of the decision under way.
 */
class KeptSignals implements LoadSignals {
  kvUsage = 0;
  queueDepth = 0;
  running = 0;
  inFlight = 0;
  prefillTokens = 0;
  activeStreams = 0;
  tokenLoad = 0;
  loadedAdapters: readonly string[] = [];
  stale = true;
  scrapedAt: number | undefined;

  constructor(private readonly clock: { now: number }) {}

  get ageMs(): number {
    return this.scrapedAt === undefined ? Infinity : Math.max(0, this.clock.now - this.scrapedAt);
  }
}

/** One replica as strategies see it, kept for as long as the pool's snapshot and updated in place. */
class KeptCandidate implements Candidate {
  readonly id: string;
  readonly url: string;
  readonly engine: Engine;
  readonly capacity: ReplicaCapacity;
  readonly signals: KeptSignals;
  saturated = false;

  constructor(spec: ReplicaSpec, clock: { now: number }) {
    this.id = spec.id;
    this.url = spec.url;
    this.engine = spec.engine;
    this.capacity = spec.capacity;
    this.signals = new KeptSignals(clock);
  }
}

const CANDIDATE = 0;
const EXCLUDED = 1;
const EJECTED = 2;

/**
 * Every field of a replica's fleet state, and whether a candidate is built
 * from it. A field added to ReplicaState does not compile until it is listed
 * here, so a kept candidate cannot go stale by missing a signal.
 */
const CANDIDATE_FIELDS = {
  health: true,
  kvUsage: true,
  queueDepth: true,
  running: true,
  loadedAdapters: true,
  scrapedAt: true,
  inFlight: true,
  prefillTokens: true,
  activeStreams: true,
  checkedAt: false,
  maxLoras: false,
  prefixCacheHitRatio: false,
  numGpuBlocks: false,
  kvCapacityTokens: false,
} as const satisfies Record<keyof ReplicaState, boolean>;

/** The fields a candidate is built from: its entry is rebuilt when any of them changes. */
type TrackedField = { [K in keyof typeof CANDIDATE_FIELDS]: (typeof CANDIDATE_FIELDS)[K] extends true ? K : never }[keyof typeof CANDIDATE_FIELDS];

/**
 * The tracked fields' values when an entry was last built, each read and
 * compared by name: a read by a variable key (state[field]) is a megamorphic
 * lookup, and a moving fleet compares them on every change. A field marked
 * true above does not compile until it is declared here (`implements`);
 * `same` and `copy` list the same fields (test/core/candidates.test.ts
 * checks kept candidates against fresh builds over random histories).
 */
class SeenFields implements Record<TrackedField, unknown> {
  health: ReplicaState['health'] | undefined = undefined;
  kvUsage: number | undefined = undefined;
  queueDepth: number | undefined = undefined;
  running: number | undefined = undefined;
  loadedAdapters: readonly string[] | undefined = undefined;
  scrapedAt: number | undefined = undefined;
  inFlight: number | undefined = undefined;
  prefillTokens: number | undefined = undefined;
  activeStreams: number | undefined = undefined;

  /** The same values as `state`'s (no state: every value undefined). */
  same(state: ReplicaState | undefined): boolean {
    return (
      this.inFlight === state?.inFlight &&
      this.scrapedAt === state?.scrapedAt &&
      this.health === state?.health &&
      this.kvUsage === state?.kvUsage &&
      this.queueDepth === state?.queueDepth &&
      this.running === state?.running &&
      this.loadedAdapters === state?.loadedAdapters &&
      this.prefillTokens === state?.prefillTokens &&
      this.activeStreams === state?.activeStreams
    );
  }

  copy(state: ReplicaState | undefined): void {
    this.health = state?.health;
    this.kvUsage = state?.kvUsage;
    this.queueDepth = state?.queueDepth;
    this.running = state?.running;
    this.loadedAdapters = state?.loadedAdapters;
    this.scrapedAt = state?.scrapedAt;
    this.inFlight = state?.inFlight;
    this.prefillTokens = state?.prefillTokens;
    this.activeStreams = state?.activeStreams;
  }
}

/** One replica of the pool: the fleet values it was last built from, and what it stands as. */
class ReplicaEntry {
  built = false;
  private readonly seen = new SeenFields();
  stale = false;
  standing = EXCLUDED;
  failing = false;
  note: TraceAlternative | undefined;
  readonly candidate: KeptCandidate;

  constructor(
    readonly spec: ReplicaSpec,
    clock: { now: number },
  ) {
    this.candidate = new KeptCandidate(spec, clock);
  }

  matches(state: ReplicaState | undefined, stale: boolean): boolean {
    return this.built && this.stale === stale && this.seen.same(state);
  }

  rebuild(pool: Pool, state: ReplicaState | undefined, stale: boolean): void {
    this.built = true;
    this.seen.copy(state);
    this.stale = stale;
    const why = exclusion(this.spec, state);
    this.failing = why === 'failing';
    this.standing = why === undefined ? CANDIDATE : why === 'ejected' ? EJECTED : EXCLUDED;
    this.note = why === undefined ? undefined : { name: this.spec.id, note: why === 'ejected' ? 'ejected (failed requests in a row)' : why };
    if (this.standing === EXCLUDED) return;
    const signals = this.candidate.signals;
    signals.scrapedAt = state?.scrapedAt;
    setSignals(signals, this.spec, state, stale, pool.tokenLoad.fullPrefillTokens);
    this.candidate.saturated = saturated(pool, signals);
  }
}

/**
 * A pool's candidates, kept between decisions (one per pool, made with the
 * snapshot). Only replicas whose fleet state changed are looked at again: all
 * of them when the fleet has no change feed, only those it names when it has
 * one (FleetView.changes). The list of candidates stays the same frozen array
 * until a replica joins or leaves it, so strategies may key what they derive
 * from a list by its identity. docs/decide.md explains the costs.
 */
export class CandidateCache {
  private readonly entries: ReplicaEntry[];
  private readonly indexOf = new Map<string, number>();
  /** The clock of the decision under way: candidates' ages are read from it. */
  private readonly clock = { now: 0 };
  private fleet: FleetView | undefined;
  private maxStalenessMs = NaN;
  private seenChanges = 0;
  /** The ids the feed named on the last look, reused: the feed writes them here (a moving fleet names a few each decision). */
  private readonly changedIds: string[] = [];
  /** No fresh entry goes stale before this time (a lower bound: looking at every entry makes it exact). */
  private staleCheckAt = -Infinity;
  // Counts over the entries, kept as they change.
  private candidateCount = 0;
  private ejectedCount = 0;
  private failingCount = 0;
  private saturatedCandidates = 0;
  private saturatedEjected = 0;
  private panicking = false;
  private listed: { candidates: readonly Candidate[]; excluded: readonly TraceAlternative[] } | undefined;
  /** A kept candidate's adapters changed in place: the list's adapter index is dropped (sdk adapterPositions). */
  private adaptersMoved = false;
  /** The listed candidates without the saturated ones, made when asked; dropped when a saturation or the list changes. */
  private unsaturatedList: readonly Candidate[] | undefined;

  constructor(replicas: readonly ReplicaSpec[]) {
    this.entries = replicas.map((spec) => new ReplicaEntry(spec, this.clock));
    replicas.forEach((spec, i) => this.indexOf.set(spec.id, i));
  }

  current(pool: Pool, fleet: FleetView, now: number, maxStalenessMs: number): CandidateSet {
    this.clock.now = now;
    const feed = fleet.changes;
    const changed =
      fleet === this.fleet && maxStalenessMs === this.maxStalenessMs && now <= this.staleCheckAt && feed
        ? feed.since(this.seenChanges, this.changedIds)
        : undefined;
    let relist = this.listed === undefined;
    if (changed) {
      this.seenChanges = feed!.count;
      for (const id of changed) {
        const i = this.indexOf.get(id);
        if (i !== undefined && this.refresh(pool, this.entries[i], fleet, now, maxStalenessMs)) relist = true;
      }
    } else {
      // Everything: no feed, a feed too far ahead, another fleet or settings, or an entry may have gone stale.
      this.fleet = fleet;
      this.maxStalenessMs = maxStalenessMs;
      this.seenChanges = feed?.count ?? 0;
      this.staleCheckAt = Infinity;
      for (const entry of this.entries) if (this.refresh(pool, entry, fleet, now, maxStalenessMs)) relist = true;
    }
    const panicking = panics(pool, this.candidateCount, this.ejectedCount, this.failingCount);
    if (relist || panicking !== this.panicking) this.list(panicking);
    else if (this.adaptersMoved) {
      adaptersChanged(this.listed!.candidates);
      if (this.unsaturatedList !== undefined) adaptersChanged(this.unsaturatedList);
    }
    this.adaptersMoved = false;
    const { candidates, excluded } = this.listed!;
    const saturated = this.saturatedCandidates + (panicking ? this.saturatedEjected : 0);
    if (saturated === 0) return { candidates, excluded, saturated };
    if (this.unsaturatedList === undefined) {
      this.unsaturatedList = Object.freeze(candidates.filter((c) => !c.saturated));
      keepAdapterIndex(this.unsaturatedList);
    }
    return { candidates, excluded, saturated, unsaturated: this.unsaturatedList };
  }

  /** Brings an entry up to date; true when the lists must be made again. */
  private refresh(pool: Pool, entry: ReplicaEntry, fleet: FleetView, now: number, maxStalenessMs: number): boolean {
    const state = fleet.replica(entry.spec.id);
    const scrapedAt = state?.scrapedAt;
    const stale = scrapedAt === undefined || now - scrapedAt > maxStalenessMs;
    if (!stale && scrapedAt + maxStalenessMs < this.staleCheckAt) this.staleCheckAt = scrapedAt + maxStalenessMs;
    if (entry.matches(state, stale)) return false;
    const standing = entry.standing;
    const note = entry.note?.note;
    const adapters = entry.candidate.signals.loadedAdapters;
    const wasSaturated = entry.candidate.saturated;
    this.count(entry, -1);
    entry.rebuild(pool, state, stale);
    this.count(entry, 1);
    if (!sameAdapters(adapters, entry.candidate.signals.loadedAdapters)) this.adaptersMoved = true;
    if (entry.candidate.saturated !== wasSaturated) this.unsaturatedList = undefined;
    return entry.standing !== standing || entry.note?.note !== note;
  }

  private count(entry: ReplicaEntry, sign: 1 | -1): void {
    if (!entry.built) return;
    const saturated = entry.standing !== EXCLUDED && entry.candidate.saturated ? sign : 0;
    if (entry.standing === CANDIDATE) {
      this.candidateCount += sign;
      this.saturatedCandidates += saturated;
    } else if (entry.standing === EJECTED) {
      this.ejectedCount += sign;
      this.saturatedEjected += saturated;
    } else if (entry.failing) {
      this.failingCount += sign;
    }
  }

  /** The lists in pool order, ejected replicas last (as buildCandidates makes them). */
  private list(panicking: boolean): void {
    const candidates: Candidate[] = [];
    const excluded: TraceAlternative[] = [];
    for (const entry of this.entries) {
      if (entry.standing === CANDIDATE) candidates.push(entry.candidate);
      else if (entry.standing === EXCLUDED) excluded.push(entry.note!);
    }
    for (const entry of this.entries) {
      if (entry.standing !== EJECTED) continue;
      if (panicking) candidates.push(entry.candidate);
      else excluded.push(entry.note!);
    }
    this.panicking = panicking;
    // Frozen: strategies share the list (and may key caches by it, as the SDK's candidatePositions does), so none may reorder it.
    this.listed = { candidates: Object.freeze(candidates), excluded: Object.freeze(excluded) };
    this.unsaturatedList = undefined;
    keepAdapterIndex(this.listed.candidates);
  }
}

function sameAdapters(a: readonly string[], b: readonly string[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * The pool's candidates now: the kept ones, or for a retry (without the
 * replicas that already failed the request) built afresh.
 */
export function buildCandidates(pool: Pool, fleet: FleetView, now: number, maxStalenessMs: number, exclude?: ReadonlySet<string>): CandidateSet {
  if (exclude === undefined || exclude.size === 0) return pool.candidateCache.current(pool, fleet, now, maxStalenessMs);
  const candidates: Candidate[] = [];
  const excluded: TraceAlternative[] = [];
  let ejected: ReplicaSpec[] | undefined; // made only when a replica is ejected
  let failing = 0;
  for (const spec of pool.replicas) {
    if (exclude.has(spec.id)) {
      excluded.push({ name: spec.id, note: 'already failed this request' });
      continue;
    }
    const state = fleet.replica(spec.id);
    const why = exclusion(spec, state);
    if (why === 'ejected') (ejected ??= []).push(spec);
    else if (why !== undefined) {
      if (why === 'failing') failing++;
      excluded.push({ name: spec.id, note: why });
    } else candidates.push(candidateOf(pool, spec, state, now, maxStalenessMs));
  }
  if (ejected) {
    const panic = panics(pool, candidates.length, ejected.length, failing);
    for (const spec of ejected) {
      if (panic) candidates.push(candidateOf(pool, spec, fleet.replica(spec.id), now, maxStalenessMs));
      else excluded.push({ name: spec.id, note: 'ejected (failed requests in a row)' });
    }
  }
  let saturated = 0;
  for (const c of candidates) if (c.saturated) saturated++;
  return { candidates, excluded, saturated };
}

function candidateOf(pool: Pool, spec: ReplicaSpec, state: ReplicaState | undefined, now: number, maxStalenessMs: number): Candidate {
  const signals = loadSignals(spec, state, now, maxStalenessMs);
  return { id: spec.id, url: spec.url, engine: spec.engine, saturated: saturated(pool, signals), signals, capacity: spec.capacity };
}

/** Saturated by the pool's thresholds. */
function saturated(pool: Pool, signals: LoadSignals): boolean {
  return signals.kvUsage >= pool.saturation.kvUsage || signals.queueDepth >= pool.saturation.queueDepth;
}

/**
 * Scraped signals while they are fresh; past max staleness the router's own
 * in-flight count stands in for them, since routing on old load data is worse
 * than random. Even fresh, the queue is at least what this router sent beyond
 * the engine's running batch since the last scrape.
 */
export function loadSignals(
  spec: ReplicaSpec,
  state: ReplicaState | undefined,
  now: number,
  maxStalenessMs: number,
  fullPrefillTokens = DEFAULT_FULL_PREFILL_TOKENS,
): LoadSignals {
  const ageMs = state?.scrapedAt !== undefined ? Math.max(0, now - state.scrapedAt) : Infinity;
  const signals: MutableSignals = { kvUsage: 0, queueDepth: 0, running: 0, inFlight: 0, loadedAdapters: spec.adapters, ageMs, stale: true };
  setSignals(signals, spec, state, ageMs > maxStalenessMs, fullPrefillTokens);
  return signals;
}

/** Everything of loadSignals but the age, written into `out`. */
function setSignals(out: Omit<MutableSignals, 'ageMs'>, spec: ReplicaSpec, state: ReplicaState | undefined, stale: boolean, fullPrefillTokens: number): void {
  const inFlight = state?.inFlight ?? 0;
  out.inFlight = inFlight;
  // Load in tokens is the router's own count: exact and fresh, stale or not.
  const prefill = state?.prefillTokens ?? 0;
  out.prefillTokens = prefill;
  out.activeStreams = state?.activeStreams ?? 0;
  out.tokenLoad = Math.min(1, prefill / fullPrefillTokens);
  out.loadedAdapters = adaptersOf(spec, state?.loadedAdapters);
  out.stale = stale;
  if (stale) {
    out.kvUsage = Math.min(1, inFlight / spec.maxNumSeqs);
    out.queueDepth = Math.max(0, inFlight - spec.maxNumSeqs);
    out.running = Math.min(inFlight, spec.maxNumSeqs);
    return;
  }
  const running = state!.running ?? 0;
  out.kvUsage = state!.kvUsage ?? 0;
  out.queueDepth = Math.max(state!.queueDepth ?? 0, inFlight - running);
  out.running = running;
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
