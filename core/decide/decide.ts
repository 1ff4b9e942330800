// decide(): the four routing decisions, in order, as one pure function of
// the request's facts, the policy snapshot, the fleet's signals and an
// injected environment. No network, no file system: the proxy, `explain` and
// the simulator all call this same code.
import { chainBlockHashes, prefixHashes, prefixSeed, type Priority, type RoutedRequest } from '../../sdk/index.ts';
import { rejection, type Rejection } from '../errors.ts';
import type { RequestFacts } from '../facts/request-facts.ts';
import type { FleetView } from '../fleet/types.ts';
import type { Pool, Generation, Tenant } from './generation.ts';
import { capacityRejection, deadlineRejection, estimatedWaitMs, quotaCost, quotaRejection } from './admit.ts';
import { buildCandidates, type CandidateSet } from './candidates.ts';
import { tenantStepSlot } from './derived.ts';
import type { Admitted, Decision, Rejected } from './decision.ts';
import type { DecideEnv } from './env.ts';
import { fallbackModel, fallbackStep, MAX_FALLBACKS } from './fallback.ts';
import { chooseModel } from './model.ts';
import { choosePool } from './pool.ts';
import { priorityClass, resolvePriority } from '../facts/priority.ts';
import { shed, type ShedVerdict } from './shed.ts';
import { chooseReplica, type ReplicaChoice } from './replica.ts';
import type { DecisionTrace, StepTrace, TraceAlternative } from './trace.ts';

export { decisionJson, type Admitted, type Decision, type Rejected } from './decision.ts';

export interface DecideOptions {
  /** Replicas that already failed this request (a retry picks among the rest). */
  readonly excludeReplicas?: ReadonlySet<string>;
  /**
   * Pre-hashed prompt blocks (trace replay, simulator) instead of hashing the
   * prompt text; a function is called only if a strategy asks for prefixes.
   */
  readonly blockHashes?: readonly number[] | (() => readonly number[]);
  /** A retry of an admitted request: its quota was taken already. */
  readonly quotaTaken?: boolean;
  /** Budget of one strategy pick on env.clock, ms (default 1). */
  readonly pickBudgetMs?: number;
  /** The request's id when `facts` is a rejection (a header the request check refused), so the decision is kept under it. */
  readonly requestId?: string;
  /**
   * The replica the request must go to (a Responses API follow-up: the engine
   * holding the previous response). Its pool is the one serving it; when it
   * takes no requests, the request is rejected as the engine would answer an
   * id it does not hold (404).
   */
  readonly pinnedReplica?: { readonly id: string; readonly notFound: Rejection };
}

export function decide(facts: RequestFacts | Rejection, snapshot: Generation, fleet: FleetView, env: DecideEnv, options: DecideOptions = NO_OPTIONS): Decision {
  const trace: DecisionTrace = {};
  if ('code' in facts) return rejected(options.requestId ?? 'unknown', facts, trace, { step: { decidedBy: 'request check', reason: facts.message } });
  const requestId = facts.requestId;

  // Who is asking.
  const tenant = resolveTenant(snapshot, facts.apiKeyHash);
  if ('code' in tenant) return rejected(requestId, tenant, trace, { step: { decidedBy: 'tenant lookup', reason: tenant.message } });
  const level = resolvePriority(facts.priority, tenant, snapshot.settings.priorityNames);
  if (typeof level !== 'number') return rejected(requestId, level, trace, { tenant, step: { decidedBy: 'request check', reason: level.message } });
  const priority: Priority = priorityClass(level);
  const maxTokens = facts.maxTokens ?? snapshot.settings.defaultMaxTokens;
  trace.tenant = tenant.steps[tenantStepSlot(facts.apiKeyHash !== undefined, priority === 'batch')];

  // The flat facts rules see (docs/policies.md lists them).
  const ruleFacts: Record<string, unknown> = {
    model: facts.requestedModel,
    resolvedModel: null,
    version: null,
    canary: false,
    adapter: null,
    promptTokens: facts.promptTokens,
    maxTokens,
    messageCount: facts.messageCount,
    hasCode: facts.hasCode,
    prompt: facts.promptText,
    tenant: tenant.id,
    tenantTier: tenant.tier,
    priority,
    priorityLevel: level,
    hasConversation: facts.conversationId !== undefined,
    stream: facts.stream,
    endpoint: facts.endpoint,
  };

  // 1. Which model.
  const modelStep = chooseModel(facts, ruleFacts, tenant, snapshot, env);
  trace.model = modelStep.trace;
  if ('rejected' in modelStep) return rejected(requestId, modelStep.rejected, trace, { tenant });
  if ('cold' in modelStep) {
    const cold = modelStep.cold.cold!;
    const r = rejection(
      'model_cold',
      `The model \`${modelStep.cold.id}\` is not deployed right now; a load has been requested. Retry after ${cold.retryAfterS} s.`,
      {
        retryAfterS: cold.retryAfterS,
      },
    );
    return rejected(requestId, r, trace, {
      tenant,
      chosen: { model: modelStep.cold.id },
      action: { type: 'trigger_load', model: modelStep.cold.id, url: cold.loadHook },
    });
  }
  let { model, version, adapter } = modelStep;
  ruleFacts.resolvedModel = model.id;
  ruleFacts.version = version.version;
  ruleFacts.canary = version.canary;
  ruleFacts.adapter = adapter ?? null;

  // 2. Which pool.
  const poolStep = choosePool(model.id, version, ruleFacts, facts.promptTokens + (facts.maxTokens ?? 0), snapshot);
  trace.pool = poolStep.trace;
  if ('rejected' in poolStep) return rejected(requestId, poolStep.rejected, trace, { tenant, chosen: { model: model.id, version: version.version } });
  let pool = poolStep.pool;
  const pinned = options.pinnedReplica;
  if (pinned && !pool.replicas.some((r) => r.id === pinned.id)) {
    // The stored response lives in another pool of this model version: it goes there.
    const home = snapshot.poolsOfVersion.get(version)?.find((p) => p.replicas.some((r) => r.id === pinned.id));
    if (!home) {
      const step = { decidedBy: 'stored response', reason: `replica ${pinned.id} serves no pool of ${model.id}@${version.version}` };
      return rejected(requestId, pinned.notFound, trace, { tenant, step, chosen: { model: model.id, version: version.version } });
    }
    pool = home;
    trace.pool = { decidedBy: 'stored response', reason: `pool ${home.name} holds replica ${pinned.id}, which stored the previous response` };
  }
  const chosen = { model: model.id, version: version.version, adapter, canary: version.canary, pool: pool.name, priority: level };

  // 3. Which replica. A pool that would refuse for capacity, or shed this
  // priority, may overflow into another pool of the version, and then its
  // model fall back to another model (both validated loop-free).
  const now = env.now();
  let candidateSet: CandidateSet;
  let verdict: ShedVerdict | undefined;
  let pinnedHome: ReplicaChoice['replica'] | undefined;
  let fallbackFrom: string | undefined;
  let fallbacks = 0;
  if (pinned) {
    // A follow-up goes to the one engine holding its previous response, whatever its checks say: only a
    // replica gone from the policy, or one that already failed this request, cannot take it. No overflow, no shedding.
    candidateSet = buildCandidates(pool, fleet, now, snapshot.settings.maxStalenessMs, options.excludeReplicas);
    pinnedHome = candidateSet.candidates.find((c) => c.id === pinned.id) ?? (options.excludeReplicas?.has(pinned.id) ? undefined : standIn(pool, pinned.id));
    if (!pinnedHome) {
      trace.replica = {
        decidedBy: 'stored response',
        reason: `replica ${pinned.id} stored the previous response and cannot take it now`,
        alternatives: candidateSet.excluded,
      };
      return rejected(requestId, pinned.notFound, trace, { tenant, chosen });
    }
  } else
    for (let hops = 0; ; hops++) {
      candidateSet = buildCandidates(pool, fleet, now, snapshot.settings.maxStalenessMs, options.excludeReplicas);
      const { candidates, excluded } = candidateSet;
      if (candidates.length === 0) {
        const r = rejection('no_healthy_replica', `No replica of pool ${pool.name} (${model.id}@${version.version}) is ready. Retry after 5 s.`, {
          retryAfterS: 5,
        });
        trace.replica = { decidedBy: 'filters', reason: 'every replica is excluded', alternatives: excluded };
        return rejected(requestId, r, trace, { tenant, chosen });
      }
      const full = capacityRejection(pool, candidates);
      // A retry was admitted once already: it is not shed the second time.
      verdict = full || options.quotaTaken ? undefined : shed(pool, candidates, level, env.random);
      const refused = full ?? verdict?.rejection;
      if (!refused) break;
      const next = hops < MAX_OVERFLOW_HOPS ? overflowOf(pool, snapshot, version, facts.promptTokens + (facts.maxTokens ?? 0)) : undefined;
      if (next) {
        trace.pool = overflowStep(trace.pool!, pool, next, full ? 'at capacity' : `shedding priority ${level} (p=${round2(verdict!.probability)})`);
        pool = next;
        chosen.pool = pool.name;
        continue;
      }
      const fallback = fallbacks < MAX_FALLBACKS ? fallbackModel(model, tenant, snapshot, facts, env) : undefined;
      let notFallen: string | undefined = typeof fallback === 'string' ? fallback : undefined;
      if (fallback !== undefined && typeof fallback !== 'string') {
        ruleFacts.resolvedModel = fallback.model.id;
        ruleFacts.version = fallback.version.version;
        ruleFacts.canary = fallback.version.canary;
        ruleFacts.adapter = fallback.adapter ?? null;
        const fallbackPool = choosePool(fallback.model.id, fallback.version, ruleFacts, facts.promptTokens + (facts.maxTokens ?? 0), snapshot);
        if (!('rejected' in fallbackPool)) {
          trace.model = fallbackStep(trace.model, model.id, fallback, `${pool.name} ${full ? 'at capacity' : `shedding priority ${level}`}`);
          trace.pool = fallbackPool.trace;
          fallbackFrom ??= model.id;
          fallbacks++;
          ({ model, version, adapter } = fallback);
          pool = fallbackPool.pool;
          Object.assign(chosen, { model: model.id, version: version.version, adapter, canary: version.canary, pool: pool.name });
          continue;
        }
        notFallen = `fallback ${fallback.model.id}: ${fallbackPool.rejected.message}`;
        ruleFacts.resolvedModel = model.id;
        ruleFacts.version = version.version;
        ruleFacts.canary = version.canary;
        ruleFacts.adapter = adapter ?? null;
      }
      trace.admit = full
        ? {
            decidedBy: 'capacity',
            reason: full.message,
            alternatives: candidates.map((c) => ({ name: c.id, score: c.signals.queueDepth, note: 'queue depth' })),
          }
        : {
            decidedBy: 'shedding',
            reason: refused.message,
            facts: { priority: level, saturation: round2(verdict!.saturation), shedProbability: round2(verdict!.probability) },
          };
      if (notFallen) trace.admit = { ...trace.admit, facts: { ...trace.admit.facts, noFallback: notFallen } };
      return rejected(requestId, refused, trace, { tenant, chosen });
    }
  const routed = new Routed(facts, snapshot.settings, chosen, tenant.id, priority, maxTokens, options.blockHashes);
  const budgetMs = options.pickBudgetMs ?? 1;
  let replicaStep;
  if (pinnedHome) {
    replicaStep = pinnedChoice(pinnedHome);
  } else {
    replicaStep = chooseReplica(routed, pool, candidateSet, budgetMs, env.clock);
  }
  trace.replica = replicaStep.trace;
  const replica = replicaStep.replica;
  const chain = replicaStep.run;

  // 4. Admit or reject. Quota is only looked at here: commit() takes it.
  const cost = quotaCost(facts, tenant, snapshot, pool);
  const overQuota = options.quotaTaken ? undefined : quotaRejection(env.quota, tenant, cost, now);
  // A shadow quota counts and reports, never refuses (docs/quotas.md).
  const shadowOver = overQuota !== undefined && tenant.quotas.shadow;
  if (overQuota && !shadowOver) {
    trace.admit = { decidedBy: 'quota', reason: overQuota.message, facts: { tokens: cost.tokens } };
    return rejected(requestId, overQuota, trace, { tenant, chosen, chain, poolRef: pool });
  }
  const modelledWaitMs = estimatedWaitMs(pool, replica, facts.promptTokens);
  const observedBaseMs = env.baseLatencyMs?.(pool.key);
  const late = deadlineRejection(modelledWaitMs, observedBaseMs, facts.deadlineMs);
  if (late) {
    trace.admit = {
      decidedBy: 'deadline',
      reason: late.message,
      facts: {
        deadlineMs: facts.deadlineMs,
        estimatedWaitMs: Math.round(modelledWaitMs + (observedBaseMs ?? 0)),
        observedBaseMs: observedBaseMs === undefined ? null : Math.round(observedBaseMs),
      },
    };
    return rejected(requestId, late, trace, { tenant, chosen, chain, poolRef: pool });
  }
  const admitFacts: Record<string, unknown> = {
    estimatedWaitMs: Math.round(modelledWaitMs + (observedBaseMs ?? 0)),
    deadlineMs: facts.deadlineMs ?? null,
    priority: level,
  };
  if (observedBaseMs !== undefined) admitFacts.observedBaseMs = Math.round(observedBaseMs);
  // A sheddable request that was not shed says how close it came.
  if (verdict && verdict.probability > 0) {
    admitFacts.saturation = round2(verdict.saturation);
    admitFacts.shedProbability = round2(verdict.probability);
  }
  if (shadowOver) admitFacts.shadowQuota = overQuota.message;
  trace.admit = {
    decidedBy: 'admitted',
    reason: shadowOver ? 'within capacity and deadline; over its shadow quota (not enforced)' : 'within quota, capacity and deadline',
    facts: admitFacts,
  };

  const admitted: Admitted = {
    admitted: true,
    requestId,
    status: 200,
    tenant: tenant.id,
    model: chosen.model,
    version: chosen.version,
    adapter: chosen.adapter,
    canary: chosen.canary,
    pool: chosen.pool,
    priority: level,
    replica: replica.id,
    replicaUrl: replica.url,
    upstreamModel: adapter ?? model.id,
    reason: `${replicaStep.strategy}: ${replicaStep.trace.reason}`,
    strategy: replicaStep.strategy,
    trace,
    routed,
    poolRef: pool,
    chain,
    tenantRef: tenant,
    charge: options.quotaTaken ? undefined : cost,
    shadowOverQuota: shadowOver || undefined,
    fallbackFrom,
    modelledWaitMs,
  };
  return admitted;
}

const NO_OPTIONS: DecideOptions = Object.freeze({});
const NO_PICKS: ReplicaChoice['run'] = Object.freeze({
  budgetMs: Infinity,
  pickMs: Object.freeze([]) as readonly number[],
  incidents: Object.freeze([]) as ReplicaChoice['run']['incidents'],
});

/** A pinned replica its checks exclude (failing, ejected, draining): a candidate with no signals, sent to anyway. */
function standIn(pool: Pool, id: string): ReplicaChoice['replica'] | undefined {
  const spec = pool.replicas.find((r) => r.id === id);
  if (!spec) return undefined;
  const signals = { kvUsage: 0, queueDepth: 0, running: 0, inFlight: 0, loadedAdapters: spec.adapters, ageMs: Infinity, stale: true };
  return { id: spec.id, url: spec.url, engine: spec.engine, saturated: false, signals, capacity: spec.capacity };
}

/** The replica of a pinned request: no strategy is asked, there is one right answer. */
function pinnedChoice(replica: ReplicaChoice['replica']): ReplicaChoice {
  return {
    replica,
    strategy: 'stored-response',
    trace: { decidedBy: 'stored response', reason: 'it holds the response named by previous_response_id' },
    run: NO_PICKS,
  };
}

/** Overflow hops followed at most; compiled policies have no loops, this only bounds the walk. */
const MAX_OVERFLOW_HOPS = 8;

/** The pool `pool` overflows into, if it exists and the request fits its length limit. */
function overflowOf(pool: Pool, snapshot: Generation, version: Parameters<Generation['poolsOfVersion']['get']>[0], requiredTokens: number): Pool | undefined {
  if (pool.overflow === undefined) return undefined;
  for (const p of snapshot.poolsOfVersion.get(version) ?? []) {
    if (p.name === pool.overflow) return p.maxModelLen === undefined || requiredTokens <= p.maxModelLen ? p : undefined;
  }
  return undefined;
}

function overflowStep(step: StepTrace, from: Pool, to: Pool, why: string): StepTrace {
  const alternatives: TraceAlternative[] = [...(step.alternatives ?? []), { name: from.name, note: why }];
  return { decidedBy: 'overflow', reason: `${step.reason}; ${from.name} ${why} → overflow to ${to.name}`, facts: step.facts, alternatives };
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/** The tenant of an API key hash (undefined: no key sent), or the 401 to answer. */
export function resolveTenant(snapshot: Generation, apiKeyHash: string | undefined): Tenant | Rejection {
  if (apiKeyHash !== undefined)
    return (
      snapshot.tenantsByKeyHash.get(apiKeyHash) ??
      rejection(
        'invalid_api_key',
        'Incorrect API key provided. Send a key this router knows as "Authorization: Bearer <key>" (keys are configured in the tenants policy).',
      )
    );
  return snapshot.anonymousTenant ?? rejection('invalid_api_key', 'An API key is required: send "Authorization: Bearer <key>".');
}

/** What a rejection knows of the request so far, each part named: a later step knows more. */
interface RejectedAt {
  readonly tenant?: Tenant;
  /** The step that refused, when it is not already in the trace (it becomes the trace's admit step). */
  readonly step?: DecisionTrace['admit'];
  /** What was chosen before the refusal. */
  readonly chosen?: { model: string; version?: string; adapter?: string; canary?: boolean; pool?: string; priority?: number };
  readonly action?: Rejected['action'];
  /** The strategy chain's run, when it ran: commit() counts its budgets even for a rejection. */
  readonly chain?: Rejected['chain'];
  readonly poolRef?: Rejected['poolRef'];
}

const NOTHING_YET: RejectedAt = Object.freeze({});

function rejected(requestId: string, r: Rejection, trace: DecisionTrace, at: RejectedAt = NOTHING_YET): Rejected {
  const { tenant, step, chosen, action, chain, poolRef } = at;
  if (step) trace.admit = step;
  return {
    admitted: false,
    requestId,
    status: r.status,
    tenant: tenant?.id,
    model: chosen?.model,
    version: chosen?.version,
    adapter: chosen?.adapter,
    canary: chosen?.canary,
    pool: chosen?.pool,
    priority: chosen?.priority,
    reason: `${r.code}: ${r.message}`,
    rejection: r,
    action,
    trace,
    chain,
    poolRef,
  };
}

/**
 * The request as strategies see it. A class, not an object literal with a
 * getter: a literal with an accessor is built on a slow path, which was a
 * visible share of every decision.
 */
class Routed implements RoutedRequest {
  readonly id: string;
  readonly model: string;
  readonly version: string;
  readonly adapter?: string;
  readonly pool: string;
  readonly tenant: string;
  readonly conversationId?: string;
  readonly priority: Priority;
  readonly promptTokens: number;
  readonly maxTokens: number;
  readonly promptTokenIds?: Uint32Array;
  // Private (#): a strategy sees the prefix hashes, never the prompt itself.
  readonly #facts: RequestFacts;
  readonly #settings: Generation['settings'];
  readonly #blockHashes: DecideOptions['blockHashes'];
  #hashes: readonly number[] | undefined;

  constructor(
    facts: RequestFacts,
    settings: Generation['settings'],
    chosen: { model: string; version: string; adapter?: string; pool: string },
    tenant: string,
    priority: Priority,
    maxTokens: number,
    blockHashes: DecideOptions['blockHashes'],
  ) {
    this.id = facts.requestId;
    this.model = chosen.model;
    this.version = chosen.version;
    this.adapter = chosen.adapter;
    this.pool = chosen.pool;
    this.tenant = tenant;
    this.conversationId = facts.conversationId;
    this.priority = priority;
    this.promptTokens = facts.promptTokens;
    this.maxTokens = maxTokens;
    if (facts.promptTokenIds !== undefined) this.promptTokenIds = facts.promptTokenIds;
    this.#facts = facts;
    this.#settings = settings;
    this.#blockHashes = blockHashes;
  }

  // Hashing a long prompt costs: only when a strategy asks.
  get prefixHashes(): readonly number[] {
    if (this.#hashes === undefined) {
      const seed = prefixSeed(this.model, this.adapter);
      const { prefixBlockChars, prefixMaxBlocks } = this.#settings;
      const blocks = this.#blockHashes;
      this.#hashes = blocks
        ? chainBlockHashes((typeof blocks === 'function' ? blocks() : blocks).slice(0, prefixMaxBlocks), seed)
        : prefixHashes(this.#facts.promptText, seed, prefixBlockChars, prefixMaxBlocks);
    }
    return this.#hashes;
  }
}
