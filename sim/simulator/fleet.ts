// The simulated fleet: one engine model per replica of the policy, and what
// each router instance sees of it. Engine load reaches a router the way it
// does in production, as scrapes every `scrapeIntervalMs` (optionally
// delivered `stalenessMs` late, stamped with the time they were taken); the
// router's own in-flight counts are exact and always fresh.
import { loadSignals } from '../../core/decide/candidates.ts';
import type { FleetView, ReplicaHealth, ReplicaState } from '../../core/fleet/types.ts';
import type { Pool, ReplicaSpec, Generation } from '../../core/decide/generation.ts';
import type { Clock } from '../clock.ts';
import { EngineModel } from '../engine/engine-model.ts';
import { getProfile, type EngineProfile } from '../engine/profiles.ts';
import { SimError } from './errors.ts';

const EMULATE = 'emulate://';

export interface FleetOptions {
  readonly scrapeIntervalMs: number;
  /** Extra delay before a scrape reaches the routers. */
  readonly stalenessMs: number;
  /** Independent router instances, each with its own in-flight counts. */
  readonly routers: number;
  /**
   * Take saturated replicas out of the candidates (health not_ready) instead
   * of letting decide() deprioritize them: the mistake docs/design.md warns
   * against, for the cascade experiment.
   */
  readonly excludeSaturated: boolean;
  /** Profile for replicas with real http(s) urls; without it they are an error. */
  readonly defaultProfile?: string;
  readonly maxStalenessMs: number;
  /** Profiles of one's own, for emulate://NAME urls (benchmarks), besides the named ones. */
  readonly profiles?: Readonly<Record<string, EngineProfile>>;
}

/** The engine profile a replica's url names, with the policy's per-replica limits (as serve does). */
export function profileFor(spec: ReplicaSpec, defaultProfile?: string, extra?: Readonly<Record<string, EngineProfile>>): EngineProfile {
  let name: string;
  if (spec.url.startsWith(EMULATE)) {
    name = spec.url.slice(EMULATE.length).split(/[/?#]/)[0];
  } else if (defaultProfile) {
    name = defaultProfile;
  } else {
    throw new SimError(
      `replica ${spec.id} (${spec.url}) is a real engine: the simulator models emulate://PROFILE replicas; pass --default-profile NAME to simulate it as that profile`,
    );
  }
  let base: EngineProfile;
  try {
    base = extra !== undefined && Object.hasOwn(extra, name) ? extra[name] : getProfile(name);
  } catch (error) {
    throw new SimError(`replica ${spec.id}: ${(error as Error).message}`);
  }
  return { ...base, maxLoras: spec.maxLoras, maxNumSeqs: spec.maxNumSeqs };
}

export class SimReplica {
  readonly engine: EngineModel;
  /** Set once a request with an adapter was sent here: scrapes then report adapters. */
  usesAdapters = false;
  /** Its engine reports KV events to the routers' index. */
  publishesKvEvents = false;

  constructor(
    readonly spec: ReplicaSpec,
    readonly pool: Pool,
    readonly profile: EngineProfile,
    clock: Clock,
  ) {
    this.engine = new EngineModel(profile, clock, { preloadAdapters: spec.adapters, fastForward: true });
  }

  get id(): string {
    return this.spec.id;
  }
}

/** One router's view of one replica: mutated in place by scrapes and by the router's own counts. */
class ViewState implements ReplicaState {
  health: ReplicaHealth = 'ready';
  kvUsage?: number;
  queueDepth?: number;
  running?: number;
  loadedAdapters?: readonly string[];
  scrapedAt?: number;
  readonly maxLoras: number;
  readonly numGpuBlocks: number;
  readonly kvCapacityTokens: number;
  inFlight = 0;
  /** Prompt tokens this router sent that have not had their first token yet, as serve counts them. */
  prefillTokens = 0;

  constructor(readonly replica: SimReplica) {
    this.maxLoras = replica.profile.maxLoras;
    this.numGpuBlocks = replica.profile.numGpuBlocks;
    this.kvCapacityTokens = replica.profile.numGpuBlocks * replica.profile.blockSize;
  }
}

/** What one router instance sees: shared scrapes, its own in-flight counts. */
export class RouterView implements FleetView {
  readonly states = new Map<string, ViewState>();

  constructor(
    replicas: readonly SimReplica[],
    private readonly options: FleetOptions,
    private readonly clock: Clock,
  ) {
    for (const r of replicas) this.states.set(r.id, new ViewState(r));
  }

  replica(id: string): ReplicaState | undefined {
    const state = this.states.get(id);
    if (state && this.options.excludeSaturated) state.health = this.saturated(state) ? 'not_ready' : 'ready';
    return state;
  }

  /** Saturated exactly as decide() would mark the candidate. */
  saturated(state: ViewState): boolean {
    const replica = state.replica;
    const signals = loadSignals(replica.spec, state, this.clock.now(), this.options.maxStalenessMs);
    return signals.kvUsage >= replica.pool.saturation.kvUsage || signals.queueDepth >= replica.pool.saturation.queueDepth;
  }

  acquire(id: string): void {
    this.states.get(id)!.inFlight++;
  }

  release(id: string): void {
    this.states.get(id)!.inFlight--;
  }

  /** The whole prompt counts (the router cannot know what the engine's cache holds) until its first token. */
  startPrefill(id: string, tokens: number): void {
    this.states.get(id)!.prefillTokens += tokens;
  }

  endPrefill(id: string, tokens: number): void {
    const state = this.states.get(id)!;
    state.prefillTokens = Math.max(0, state.prefillTokens - tokens);
  }
}

interface Scrape {
  readonly at: number;
  readonly kvUsage: number;
  readonly queueDepth: number;
  readonly running: number;
  readonly adapters?: readonly string[];
}

export class SimFleet {
  readonly replicas: SimReplica[] = [];
  readonly byId = new Map<string, SimReplica>();
  readonly views: RouterView[] = [];
  private scrapes = 0;

  constructor(
    snapshot: Generation,
    private readonly clock: Clock,
    private readonly options: FleetOptions,
  ) {
    for (const pool of snapshot.pools) {
      for (const spec of pool.replicas) {
        const replica = new SimReplica(spec, pool, profileFor(spec, options.defaultProfile, options.profiles), clock);
        this.replicas.push(replica);
        this.byId.set(spec.id, replica);
      }
    }
    for (let i = 0; i < options.routers; i++) this.views.push(new RouterView(this.replicas, options, clock));
  }

  get scrapeCount(): number {
    return this.scrapes;
  }

  /**
   * Scrapes every replica now for one router (or all); it sees the values
   * now, or `stalenessMs` later.
   */
  scrape(view?: RouterView): void {
    this.scrapes++;
    const at = this.clock.now();
    for (const replica of this.replicas) {
      const engine = replica.engine;
      let adapters: readonly string[] | undefined;
      if (replica.usesAdapters) {
        // vLLM's lora_requests_info: adapters of running and waiting requests.
        const m = engine.snapshot();
        adapters = m.waitingAdapters.length ? [...new Set([...m.runningAdapters, ...m.waitingAdapters])] : m.runningAdapters;
      }
      const scrape: Scrape = { at, kvUsage: engine.kvUsage, queueDepth: engine.waitingCount, running: engine.runningCount, adapters };
      if (this.options.stalenessMs > 0) this.clock.schedule(this.options.stalenessMs, () => this.deliver(replica.id, scrape, view));
      else this.deliver(replica.id, scrape, view);
    }
  }

  private deliver(id: string, scrape: Scrape, only?: RouterView): void {
    for (const view of only ? [only] : this.views) {
      const state = view.states.get(id)!;
      // A late delivery never overwrites a newer one.
      if (state.scrapedAt !== undefined && state.scrapedAt > scrape.at) continue;
      state.kvUsage = scrape.kvUsage;
      state.queueDepth = scrape.queueDepth;
      state.running = scrape.running;
      state.scrapedAt = scrape.at;
      if (scrape.adapters) state.loadedAdapters = scrape.adapters;
    }
  }
}
