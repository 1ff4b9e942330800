// The simulator: a policy, a workload and a seed in; what the policy does to
// latency, throughput, caches and rejections out. Virtual time runs on a
// discrete-event clock; every replica is an engine model; every request goes
// through the same decide() and strategy plugins as in `serve`. The same
// seed gives the same result.
import { join } from 'node:path';
import { commit, complete, wantsCompletion } from '../../core/decide/commit.ts';
import { chosen, decide, type Admitted as AdmittedDecision, type Decision, type DecideOptions } from '../../core/decide/decide.ts';
import { createEnv, type DecideEnv } from '../../core/decide/env.ts';
import { MemoryQuotaStore } from '../../core/decide/quota.ts';
import { requestFacts, sha256Hex, type FactsOptions } from '../../core/facts/request-facts.ts';
import { buildGeneration, type CompiledPolicy, type Generation, type Pool } from '../../core/decide/generation.ts';
import { PolicyError } from '../../core/diagnostics/problem.ts';
import { KvIndex } from '../../core/fleet/kv-index.ts';
import { chainBlockHashes, prefixSeed, seededRandom } from '../../sdk/index.ts';
import { KvEventRecorder, type KvBlockEvent } from '../engine/kv-events.ts';
import type { EngineProfile } from '../engine/profiles.ts';
import type { PromptBlocks } from '../engine/prompt-blocks.ts';
import type { EngineRequest, EngineResult } from '../engine/types.ts';
import { EventClock } from '../event-clock.ts';
import { engineBlocks, rawBlockIds } from '../workload/block-runs.ts';
import { WorkloadError, type Workload } from '../workload/load.ts';
import { adapterNames, SyntheticSource, type ResolvedTenant } from '../workload/synthetic.ts';
import { TraceSource } from '../workload/trace.ts';
import type { RequestSource, SimRequestSpec } from '../workload/types.ts';
import { CsvWriter } from './csv-writer.ts';
import { SimError } from './errors.ts';
import { SimFleet, type RouterView, type SimReplica } from './fleet.ts';
import { GroupedStats, GroupStats, recordCompletion, type GroupSummary } from './stats.ts';
import type { PolicyProblem } from '../../core/diagnostics/problem.ts';
import { formatPath } from '../../core/diagnostics/schema-problems.ts';

export interface SimOptions {
  /** Compiled once; each router instance gets its own generation of it (its own strategy instances and state). */
  readonly policy: CompiledPolicy;
  readonly workload: Workload;
  /** Default: the workload's seed, else 1. */
  readonly seed?: number | string;
  /** Requests to send; overrides the workload's `requests`. */
  readonly requests?: number;
  /** Default: the policy's scrape_interval_ms. */
  readonly scrapeIntervalMs?: number;
  /** Extra age of every scrape when it reaches the router. Default 0. */
  readonly stalenessMs?: number;
  /** Router instances sharing the fleet, each with its own in-flight counts and strategy state. Default 1. */
  readonly routers?: number;
  /** Exclude saturated replicas instead of deprioritizing them (the cascade experiment). */
  readonly excludeSaturated?: boolean;
  /**
   * Every replica publishes KV cache events into the routers' shared index.
   * Default: the replicas with `kv_events` in the policy do.
   */
  readonly kvEvents?: boolean;
  /** Engine profile for replicas with http(s) urls. */
  readonly defaultProfile?: string;
  /** Profiles of one's own that emulate://NAME urls may name (benchmarks). */
  readonly profiles?: Readonly<Record<string, EngineProfile>>;
  /** Writes requests.csv (one row per request, streamed) and timeline.csv here. */
  readonly outDir?: string;
  /** Fleet samples every this many virtual ms (default 10 s). */
  readonly timelineIntervalMs?: number;
  readonly onTimeline?: (row: TimelineRow) => void;
  /** Every decision, as it is made (tests, tools). */
  readonly onDecision?: (decision: Decision) => void;
  /** Requests from elsewhere than the workload's own (recorded traffic: sim/workload/recorded.ts); the workload then only names the run. */
  readonly source?: (seed: string) => RequestSource;
}

export interface TimelineRow {
  readonly tS: number;
  /** Over the interval that ends at tS. */
  readonly arrivals: number;
  readonly completed: number;
  readonly rejected: number;
  readonly meanTtftMs: number;
  /** Fleet state at tS. */
  readonly running: number;
  readonly waiting: number;
  readonly meanKvUsage: number;
  readonly maxKvUsage: number;
  /** Replicas the first router sees as saturated (and excludes, with excludeSaturated). */
  readonly saturated: number;
}

export interface ReplicaSummary {
  readonly id: string;
  readonly pool: string;
  readonly profile: string;
  /** Requests that finished on this replica. */
  readonly completed: number;
  readonly preemptions: number;
  readonly prefixHitRate: number;
  readonly steps: number;
  readonly meanBatchSize: number;
  readonly distinctAdaptersPerBatch: number;
  /** Element b: steps that ran b requests (trailing zeros cut). */
  readonly batchSizes: readonly number[];
}

export interface SimResult {
  readonly seed: string;
  readonly workload: string;
  /** Virtual time from the first arrival to the last arrival or completion, ms. */
  readonly simulatedMs: number;
  readonly events: number;
  readonly overall: GroupSummary;
  readonly pools: Record<string, GroupSummary>;
  readonly tenants: Record<string, GroupSummary>;
  readonly classes: Record<string, GroupSummary>;
  /** By the request's integer priority as decided ("0", "-1"; "(unresolved)" when refused before it was known). */
  readonly priorities: Record<string, GroupSummary>;
  readonly replicas: readonly ReplicaSummary[];
  readonly files: readonly string[];
}

const REQUEST_COLUMNS = [
  'id',
  'arrival_ms',
  'tenant',
  'class',
  'conversation',
  'turn',
  'model',
  'adapter',
  'pool',
  'replica',
  'status',
  'reason',
  'prompt_tokens',
  'cached_tokens',
  'output_tokens',
  'ttft_ms',
  'e2e_ms',
  'preempted',
];
const TIMELINE_COLUMNS = ['t_s', 'arrivals', 'completed', 'rejected', 'mean_ttft_ms', 'running', 'waiting', 'mean_kv_usage', 'max_kv_usage', 'saturated'];

interface Router {
  readonly snapshot: Generation;
  readonly env: DecideEnv;
  readonly view: RouterView;
}

/** A request admitted to an engine: the engine calls back into the simulation through it. */
class Admitted implements EngineRequest {
  readonly id: string;
  readonly promptTokens: number;
  readonly maxTokens: number;
  readonly blocks: PromptBlocks;
  readonly adapter?: string;
  /**
   * What the completion needs of the decision, not the decision itself: an
   * admitted request lives for seconds of virtual time, and what it keeps
   * survives young-generation collections with it. The handles (the routed
   * request with its prompt facts and prefix hashes, the chain's run) only
   * when a strategy of the pool's chain is told how the request ended.
   */
  readonly value: AdmittedDecision['value'];
  readonly pool: Pool;
  readonly completion?: Pick<AdmittedDecision, 'value' | 'handles'>;
  firstTokenAt = NaN;

  constructor(
    readonly sim: Simulation,
    readonly spec: SimRequestSpec,
    decision: AdmittedDecision,
    readonly router: Router,
    readonly replica: SimReplica,
    readonly groups: GroupStats[],
  ) {
    const { value, handles } = decision;
    this.value = value;
    this.pool = handles.pool;
    if (wantsCompletion(handles.pool)) this.completion = { value, handles };
    this.id = value.requestId;
    this.promptTokens = spec.promptTokens;
    this.maxTokens = spec.outputTokens;
    this.adapter = value.adapter;
    const runs = spec.sequenceBlocks ?? spec.blocks;
    const seed = prefixSeed(value.model, value.adapter);
    const blocks = engineBlocks(runs, seed);
    // A replica that publishes KV events names its blocks as the router hashes them.
    this.blocks = replica.publishesKvEvents ? { ...blocks, hashes: chainBlockHashes(rawBlockIds(runs), seed) } : blocks;
  }

  onFirstToken(t: number): void {
    if (Number.isNaN(this.firstTokenAt)) this.router.view.endPrefill(this.replica.id, this.promptTokens);
    this.firstTokenAt = t;
  }

  onFinish(result: EngineResult, t: number): void {
    this.sim.finished(this, result, t);
  }
}

class Simulation {
  readonly clock = new EventClock();
  readonly seed: string;
  readonly routers: Router[] = [];
  readonly fleet: SimFleet;
  /** The engines' KV events, as every router's subscriptions would see them: one index shared by all. */
  readonly kvIndex: KvIndex;
  readonly source: RequestSource;
  readonly overall = new GroupStats();
  readonly pools = new GroupedStats();
  readonly tenants = new GroupedStats();
  readonly classes = new GroupedStats();
  readonly priorities = new GroupedStats();
  private readonly poolLabels = new Map<Pool, string>();
  private readonly singleModel: boolean;
  private readonly scrapeIntervalMs: number;
  private readonly routerRandom: () => number;
  private readonly csv?: CsvWriter;
  private readonly timelineCsv?: CsvWriter;
  readonly files: string[] = [];

  private nextArrival: SimRequestSpec | undefined;
  private followUpsPending = 0;
  private inFlight = 0;
  private counter = 0;
  private firstArrivalAt = NaN;
  private lastActivityAt = 0;
  // One request's headers and body, rewritten for each: the facts builder keeps neither.
  private readonly headers: Record<string, string | undefined> = { 'x-conversation-id': undefined, 'x-priority': undefined, 'x-deadline-ms': undefined };
  private readonly body: { model: string; messages: readonly { role: string; content: string }[]; max_tokens?: number; stream: true } = {
    model: '',
    messages: [],
    max_tokens: undefined,
    stream: true,
  };
  // The current timeline interval.
  private window = { arrivals: 0, completed: 0, rejected: 0, ttftSum: 0 };

  constructor(private readonly options: SimOptions) {
    const workload = options.workload;
    this.seed = String(options.seed ?? workload.spec.seed ?? 1);
    const routerCount = options.routers ?? 1;
    if (!(Number.isInteger(routerCount) && routerCount >= 1)) throw new SimError(`routers must be a positive integer, not ${routerCount}`);
    const now = () => this.clock.now();
    this.kvIndex = new KvIndex({ now });
    const seeds = Array.from({ length: routerCount }, (_, i) => (routerCount === 1 ? this.seed : `${this.seed}:router-${i}`));
    const snapshots = seeds.map((seed) => {
      // The virtual clock for strategies, the engines' KV cache contents for their ctx.kvIndex.
      const built = buildGeneration(options.policy, { seed, now, kvIndex: this.kvIndex });
      if (!built.snapshot) throw new PolicyError(built.problems);
      return built.snapshot;
    });
    const snapshot = snapshots[0];
    const settings = snapshot.settings;
    this.scrapeIntervalMs = options.scrapeIntervalMs ?? settings.scrapeIntervalMs;
    if (!(this.scrapeIntervalMs > 0)) throw new SimError(`the scrape interval must be positive, not ${this.scrapeIntervalMs} ms`);
    this.fleet = new SimFleet(snapshot, this.clock, {
      scrapeIntervalMs: this.scrapeIntervalMs,
      stalenessMs: options.stalenessMs ?? 0,
      routers: routerCount,
      excludeSaturated: options.excludeSaturated ?? false,
      defaultProfile: options.defaultProfile,
      profiles: options.profiles,
      maxStalenessMs: settings.maxStalenessMs,
    });
    if (this.fleet.replicas.length === 0) throw new SimError('the policy has no replicas: there is nothing to simulate');
    if (this.fleet.replicas.every((r) => r.spec.draining)) throw new SimError('every replica of the policy is draining: nothing can take a request');
    for (const replica of this.fleet.replicas) if (options.kvEvents || replica.spec.kvEvents) this.publishKvEvents(replica);
    snapshots.forEach((snap, i) => {
      this.routers.push({
        snapshot: snap,
        env: createEnv({ seed: `${seeds[i]}:env`, now, clock: now, quota: new MemoryQuotaStore() }),
        view: this.fleet.views[i],
      });
    });
    this.routerRandom = seededRandom(`${this.seed}:routers`);
    this.singleModel = new Set(snapshot.pools.map((p) => `${p.model}@${p.version}`)).size === 1;
    for (const snap of snapshots) for (const pool of snap.pools) this.poolLabels.set(pool, this.singleModel ? pool.name : pool.key);

    if (options.source) this.source = options.source(this.seed);
    else {
      const tenants = resolveTenants(workload, snapshot);
      const spec = options.requests !== undefined ? { ...workload.spec, requests: options.requests } : workload.spec;
      this.source = spec.trace ? new TraceSource(spec, workload.tracePath!, this.seed, tenants) : new SyntheticSource(spec, this.seed, tenants);
    }

    if (options.outDir) {
      this.csv = new CsvWriter(join(options.outDir, 'requests.csv'), REQUEST_COLUMNS);
      this.timelineCsv = new CsvWriter(join(options.outDir, 'timeline.csv'), TIMELINE_COLUMNS);
      this.files.push(this.csv.path, this.timelineCsv.path);
    }
  }

  /** The replica's engine reports its cache to the shared index, one batch per event, delivered at once. */
  private publishKvEvents(replica: SimReplica): void {
    const index = this.kvIndex;
    const id = replica.id;
    let seq = 0n;
    index.track(id);
    replica.publishesKvEvents = true;
    replica.engine.setKvListener(new KvEventRecorder((event: KvBlockEvent) => index.apply(id, { seq: seq++, ts: this.clock.now() / 1000, events: [event] })));
  }

  run(): SimResult {
    try {
      this.nextArrival = this.source.next();
      if (!this.nextArrival) throw new SimError(`the workload ${this.options.workload.file} sends no requests (is duration_s shorter than the first arrival?)`);
      this.firstArrivalAt = this.nextArrival.at;
      this.clock.at(this.nextArrival.at, this.onArrival);
      this.startScrapes();
      const timelineMs = this.options.timelineIntervalMs ?? 10_000;
      if (this.timelineCsv || this.options.onTimeline) this.clock.schedule(timelineMs, () => this.onTimeline(timelineMs));
      this.clock.run();
    } finally {
      this.source.close();
      this.csv?.close();
      this.timelineCsv?.close();
    }
    if (this.inFlight !== 0) throw new SimError(`${this.inFlight} requests never finished: the engine model stalled`);
    const overall = this.overall.summary();
    if (overall.requests > 0 && overall.completed === 0) {
      const reasons = Object.entries(overall.rejections)
        .map(([code, n]) => `${code}: ${n}`)
        .join(', ');
      throw new SimError(`no request completed: all ${overall.requests} were rejected (${reasons}); this policy cannot serve this workload`);
    }
    return this.result(overall);
  }

  private get active(): boolean {
    return this.nextArrival !== undefined || this.followUpsPending > 0 || this.inFlight > 0;
  }

  private readonly onArrival = (): void => {
    const spec = this.nextArrival!;
    this.nextArrival = this.source.next();
    if (this.nextArrival) this.clock.at(this.nextArrival.at, this.onArrival);
    this.arrive(spec);
  };

  private readonly onFollowUp = (spec: SimRequestSpec): void => {
    this.followUpsPending--;
    this.arrive(spec);
  };

  /**
   * Each router scrapes on its own schedule, offset from the others' as
   * independent routers would be, so they do not all see the same values.
   */
  private startScrapes(): void {
    const views = this.fleet.views;
    views.forEach((view, i) => {
      const scrape = (): void => {
        this.fleet.scrape(views.length === 1 ? undefined : view);
        if (this.active) this.clock.schedule(this.scrapeIntervalMs, scrape);
      };
      if (i === 0) scrape();
      else this.clock.schedule((i * this.scrapeIntervalMs) / views.length, scrape);
    });
  }

  private arrive(spec: SimRequestSpec): void {
    this.lastActivityAt = spec.at;
    const router = this.routers.length === 1 ? this.routers[0] : this.routers[Math.floor(this.routerRandom() * this.routers.length)];
    // The request as a client would send it, through the same facts builder as `serve`.
    const headers = this.headers;
    headers['x-conversation-id'] = spec.conversationId;
    headers['x-priority'] = spec.priority;
    headers['x-deadline-ms'] = spec.deadlineMs === undefined ? undefined : String(spec.deadlineMs);
    const body = this.body;
    body.model = spec.model;
    body.messages = messagesOf(spec.messageCount, spec.text);
    body.max_tokens = spec.maxTokens;
    const facts = requestFacts(
      { requestId: `r${this.counter++}`, endpoint: 'chat', headers, body, apiKeyHash: spec.apiKeyHash, promptTokens: spec.promptTokens },
      TRUSTED_BODY,
    );
    // A literal, not a spread of shared defaults: spreading an object is a slow path (3% of the simulator's time).
    const options: DecideOptions = { pickBudgetMs: Infinity, blockHashes: lazyBlockIds(spec, router.snapshot.settings.prefixMaxBlocks) };
    const decision = decide(facts, router.snapshot, router.view, router.env, options);
    commit(decision, router.env);
    this.options.onDecision?.(decision);
    const groups = this.groupsOf(spec, decision);
    const at = spec.at;
    this.window.arrivals++;
    for (const g of groups) g.arrival(at);

    if (!decision.ok) {
      this.reject(spec, decision, groups, decision.rejection.code);
      return;
    }
    const replica = this.fleet.byId.get(decision.value.replica)!;
    const admitted = new Admitted(this, spec, decision, router, replica, groups);
    try {
      replica.engine.submit(admitted);
    } catch (error) {
      const message = (error as Error).message;
      this.reject(spec, decision, groups, /max_model_len/.test(message) ? 'context_length_exceeded' : 'engine_rejected');
      return;
    }
    if (decision.value.adapter !== undefined) replica.usesAdapters = true;
    router.view.acquire(replica.id);
    router.view.startPrefill(replica.id, spec.promptTokens);
    this.inFlight++;
  }

  finished(request: Admitted, result: EngineResult, t: number): void {
    const { spec, value, pool, router, replica } = request;
    this.lastActivityAt = t;
    router.view.release(replica.id);
    if (Number.isNaN(request.firstTokenAt)) router.view.endPrefill(replica.id, request.promptTokens);
    this.inFlight--;
    if (request.completion) complete(request.completion, true);
    recordCompletion(request.groups, spec.at, result.firstTokenAt, t, result.promptTokens, result.cachedTokens, result.outputTokens, result.preempted);
    this.window.completed++;
    this.window.ttftSum += result.firstTokenAt - spec.at;
    this.csv?.line(
      `${value.requestId},${round3(spec.at)},${value.tenant ?? ''},${spec.klass},${spec.conversationId ?? ''},${spec.turn},${value.model},${value.adapter ?? ''},${this.poolLabels.get(pool)},${replica.id},200,ok,${result.promptTokens},${result.cachedTokens},${result.outputTokens},${round3(result.firstTokenAt - spec.at)},${round3(t - spec.at)},${result.preempted}`,
    );
    const next = this.source.followUp(spec, t);
    if (next) {
      this.followUpsPending++;
      this.clock.at(next.at, () => this.onFollowUp(next));
    }
  }

  private reject(spec: SimRequestSpec, decision: Decision, groups: GroupStats[], code: string): void {
    for (const g of groups) g.rejection(code);
    this.window.rejected++;
    const known = chosen(decision);
    this.csv?.line(
      `${known.requestId},${round3(spec.at)},${known.tenant ?? ''},${spec.klass},${spec.conversationId ?? ''},${spec.turn},${known.model ?? ''},${known.adapter ?? ''},${known.pool === undefined ? '' : this.poolLabel(decision)},,${known.status},${code},${spec.promptTokens},,,,,`,
    );
  }

  private poolLabel(decision: Decision): string {
    if (decision.ok) return this.poolLabels.get(decision.handles.pool)!;
    const { pool, model, version } = decision.known;
    if (pool === undefined) return '(no pool)';
    return this.singleModel ? pool : `${model}@${version}/${pool}`;
  }

  private groupsOf(spec: SimRequestSpec, decision: Decision): GroupStats[] {
    const pool = this.poolLabel(decision);
    const { tenant, priority } = chosen(decision);
    return [
      this.overall,
      this.pools.get(pool),
      this.tenants.get(tenant ?? '(unknown)'),
      this.classes.get(spec.klass),
      this.priorities.get(priority === undefined ? '(unresolved)' : String(priority)),
    ];
  }

  private onTimeline(intervalMs: number): void {
    let running = 0;
    let waiting = 0;
    let kvSum = 0;
    let kvMax = 0;
    let saturated = 0;
    const view = this.fleet.views[0];
    for (const replica of this.fleet.replicas) {
      const engine = replica.engine;
      running += engine.runningCount;
      waiting += engine.waitingCount;
      kvSum += engine.kvUsage;
      if (engine.kvUsage > kvMax) kvMax = engine.kvUsage;
      if (view.saturated(view.states.get(replica.id)!)) saturated++;
    }
    const w = this.window;
    const row: TimelineRow = {
      tS: this.clock.now() / 1000,
      arrivals: w.arrivals,
      completed: w.completed,
      rejected: w.rejected,
      meanTtftMs: w.completed ? w.ttftSum / w.completed : NaN,
      running,
      waiting,
      meanKvUsage: kvSum / Math.max(1, this.fleet.replicas.length),
      maxKvUsage: kvMax,
      saturated,
    };
    this.window = { arrivals: 0, completed: 0, rejected: 0, ttftSum: 0 };
    this.options.onTimeline?.(row);
    this.timelineCsv?.row([
      row.tS,
      row.arrivals,
      row.completed,
      row.rejected,
      round3(row.meanTtftMs),
      row.running,
      row.waiting,
      round3(row.meanKvUsage),
      round3(row.maxKvUsage),
      row.saturated,
    ]);
    if (this.active) this.clock.schedule(intervalMs, () => this.onTimeline(intervalMs));
  }

  private result(overall: GroupSummary): SimResult {
    const replicas: ReplicaSummary[] = this.fleet.replicas.map((r) => {
      const m = r.engine.snapshot();
      return {
        id: r.id,
        pool: this.poolLabels.get(r.pool)!,
        profile: r.profile.name,
        completed: m.finished.length + m.finished.stop,
        preemptions: m.preemptions,
        prefixHitRate: m.prefixCacheQueries ? m.prefixCacheHits / m.prefixCacheQueries : 0,
        steps: m.steps,
        meanBatchSize: r.engine.meanBatchSize,
        distinctAdaptersPerBatch: m.meanDistinctAdapters,
        batchSizes: trimZeros(r.engine.batchSizeHistogram()),
      };
    });
    const pools = this.pools.summaries();
    const byPool = new Map<string, ReplicaSummary[]>();
    for (const r of replicas) byPool.set(r.pool, [...(byPool.get(r.pool) ?? []), r]);
    const weighted = (list: readonly ReplicaSummary[], key: 'distinctAdaptersPerBatch' | 'meanBatchSize') => {
      const steps = list.reduce((s, r) => s + r.steps, 0);
      return steps ? list.reduce((s, r) => s + r[key] * r.steps, 0) / steps : 0;
    };
    for (const [label, summary] of Object.entries(pools)) {
      const list = byPool.get(label) ?? [];
      summary.distinctAdaptersPerBatch = weighted(list, 'distinctAdaptersPerBatch');
      summary.meanBatchSize = weighted(list, 'meanBatchSize');
    }
    overall.distinctAdaptersPerBatch = weighted(replicas, 'distinctAdaptersPerBatch');
    overall.meanBatchSize = weighted(replicas, 'meanBatchSize');
    return {
      seed: this.seed,
      workload: this.options.workload.file,
      simulatedMs: this.lastActivityAt - (Number.isNaN(this.firstArrivalAt) ? 0 : this.firstArrivalAt),
      events: this.clock.events,
      overall,
      pools,
      tenants: this.tenants.summaries(),
      classes: this.classes.summaries(),
      priorities: this.priorities.summaries(),
      replicas,
      files: this.files,
    };
  }
}

/**
 * The request's raw block ids, expanded only if a strategy asks for prefixes.
 * (Returned, not assigned, so that the closure carries no name: tsx's
 * keepNames would name every such closure per request.)
 */
function lazyBlockIds(spec: SimRequestSpec, limit: number): () => number[] {
  return () => rawBlockIds(spec.blocks, limit);
}

/** The simulator's bodies are its own, built valid: fastify's schema check has no counterpart here. */
const TRUSTED_BODY: FactsOptions = Object.freeze({ bodyValidated: true });

// A simulated prompt is its blocks; its messages only carry the count (and a
// code snippet, when the workload gives one). Text-less lists are shared.
const blankMessages: { role: string; content: string }[][] = [];

function messagesOf(count: number, text: string | undefined): readonly { role: string; content: string }[] {
  if (text !== undefined) {
    const messages = Array.from({ length: Math.max(1, count) }, () => BLANK_MESSAGE);
    messages[messages.length - 1] = { role: 'user', content: text };
    return messages;
  }
  return (blankMessages[count] ??= Object.freeze(Array.from({ length: count }, () => BLANK_MESSAGE)) as { role: string; content: string }[]);
}

const BLANK_MESSAGE: { readonly role: string; readonly content: string } = Object.freeze({ role: 'user', content: '' });

function trimZeros(list: number[]): number[] {
  let n = list.length;
  while (n > 0 && list[n - 1] === 0) n--;
  return list.slice(0, n);
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}

/** The workload's tenants as the policy knows them: API key hashes, checked. */
export function resolveTenants(workload: Workload, snapshot: Generation): ResolvedTenant[] {
  const spec = workload.spec;
  const problems: PolicyProblem[] = [];
  const keyOf = new Map<string, string>();
  for (const [hash, tenant] of snapshot.tenantsByKeyHash) if (!keyOf.has(tenant.id)) keyOf.set(tenant.id, hash);
  const known = () => [...snapshot.tenantsById.keys()].join(', ');
  const checkModel = (name: string, path: (string | number)[]) => {
    if (!snapshot.aliases.has(name) && !snapshot.models.has(name) && !snapshot.adapters.has(name)) {
      problems.push(workload.problemAt(path, `${formatPath(path)}: the policy has no model, alias or adapter named "${name}"`));
    }
  };
  const checkAdapters = (mix: Parameters<typeof adapterNames>[0] | undefined, path: (string | number)[]) => {
    if (!mix) return;
    const missing = adapterNames(mix).filter((a) => !snapshot.adapters.has(a));
    if (missing.length)
      problems.push(
        workload.problemAt(
          path,
          `${formatPath(path)}: the policy has no adapter named ${missing
            .slice(0, 3)
            .map((a) => `"${a}"`)
            .join(', ')}${missing.length > 3 ? ` (and ${missing.length - 3} more)` : ''}`,
        ),
      );
  };
  if (spec.model !== undefined) checkModel(spec.model, ['model']);
  spec.models?.forEach((m, i) => checkModel(m.name, ['models', i, 'name']));
  checkAdapters(spec.adapters, ['adapters']);

  const tenants: ResolvedTenant[] = (spec.tenants ?? []).map((t, i) => {
    let apiKeyHash: string | undefined;
    if (t.api_key !== undefined) {
      apiKeyHash = sha256Hex(t.api_key);
      if (!snapshot.tenantsByKeyHash.has(apiKeyHash))
        problems.push(workload.problemAt(['tenants', i, 'api_key'], `tenants[${i}].api_key: no tenant of the policy has this API key`));
    } else if (t.tenant !== undefined) {
      apiKeyHash = keyOf.get(t.tenant);
      if (apiKeyHash === undefined && snapshot.anonymousTenant?.id !== t.tenant) {
        problems.push(
          workload.problemAt(
            ['tenants', i, 'tenant'],
            snapshot.tenantsById.has(t.tenant)
              ? `tenants[${i}].tenant: "${t.tenant}" has no API key in the policy and is not the anonymous tenant`
              : `tenants[${i}].tenant: no tenant "${t.tenant}" in the policy (known: ${known()})`,
          ),
        );
      }
    } else if (!snapshot.anonymousTenant) {
      problems.push(workload.problemAt(['tenants', i], `tenants[${i}]: the policy has no anonymous tenant`));
    }
    if (t.model !== undefined) checkModel(t.model, ['tenants', i, 'model']);
    checkAdapters(t.adapters, ['tenants', i, 'adapters']);
    return { apiKeyHash, weight: t.weight ?? 1, model: t.model, batchFraction: t.batch_fraction, adapters: t.adapters };
  });
  if (tenants.length === 0 && !snapshot.anonymousTenant && !spec.trace) {
    problems.push(workload.problemAt([], 'the workload sends no API key (add "tenants") and the policy has no anonymous tenant'));
  }
  if (problems.length) throw new WorkloadError(problems);
  return tenants;
}

/** Runs one simulation to the end. Throws SimError or WorkloadError on a configuration that cannot run. */
export function simulate(options: SimOptions): SimResult {
  return new Simulation(options).run();
}
