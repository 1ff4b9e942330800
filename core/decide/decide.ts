// decide(): the four routing decisions, in order, as one pure function of
// the request's facts, a generation, the fleet's signals and an injected
// environment. No network, no file system: the proxy, `explain` and the
// simulator all call this same code. Each step answers `{ ok, value | rejection,
// trace }` (decision.ts); the first refusal ends the decision.
import { chainBlockHashes, prefixHashes, prefixSeed, type Priority, type RoutedRequest } from '../../sdk/index.ts';
import { isRejection, rejection, type Rejection } from '../errors.ts';
import type { RequestFacts } from '../facts/request-facts.ts';
import type { FleetView } from '../fleet/types.ts';
import type { Generation, Pool, Tenant } from './generation.ts';
import { admitStep } from './admit.ts';
import { tenantStepSlot } from './derived.ts';
import { rejectedWith, type Decision, type StepResult } from './decision.ts';
import type { DecideEnv } from './env.ts';
import { chooseModel, type ModelChoice } from './model.ts';
import { place, withModel, type Placement } from './place.ts';
import { choosePool } from './pool.ts';
import { priorityClass, resolvePriority } from '../facts/priority.ts';
import { chooseReplica, type ReplicaChoice } from './replica.ts';
import type { DecisionTrace } from './trace.ts';

export { chosen, decisionJson, rejectedWith, type Admitted, type Decision, type Rejected } from './decision.ts';

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

export function decide(
  facts: RequestFacts | Rejection,
  generation: Generation,
  fleet: FleetView,
  env: DecideEnv,
  options: DecideOptions = NO_OPTIONS,
): Decision {
  const trace: DecisionTrace = {};
  if (isRejection(facts)) {
    trace.admit = { decidedBy: 'request check', reason: facts.message };
    return rejectedWith(facts, { requestId: options.requestId ?? 'unknown' }, trace);
  }
  const requestId = facts.requestId;

  // Who is asking.
  const who = resolveTenant(generation, facts.apiKeyHash);
  if (!who.ok) {
    trace.admit = who.trace;
    return rejectedWith(who.rejection, { requestId }, trace);
  }
  const tenant = who.value;
  const level = resolvePriority(facts.priority, tenant, generation.settings.priorityNames);
  if (typeof level !== 'number') {
    trace.admit = { decidedBy: 'request check', reason: level.message };
    return rejectedWith(level, { requestId, tenant: tenant.id }, trace);
  }
  const priority: Priority = priorityClass(level);
  const maxTokens = facts.maxTokens ?? generation.settings.defaultMaxTokens;
  trace.tenant = tenant.steps[tenantStepSlot(facts.apiKeyHash !== undefined, priority === 'batch')];
  const ruleFacts = requestRuleFacts(facts, tenant, priority, level, maxTokens);

  // 1. Which model.
  const modelStep = chooseModel(facts, ruleFacts, tenant, generation, env);
  trace.model = modelStep.trace;
  if (!modelStep.ok) {
    const { action } = modelStep;
    return rejectedWith(modelStep.rejection, { requestId, tenant: tenant.id, model: action?.model, action }, trace);
  }
  const { model, version } = modelStep.value;

  // 2. Which pool.
  const poolStep = choosePool(model.id, version, withModel(ruleFacts, modelStep.value), facts.promptTokens + (facts.maxTokens ?? 0), generation);
  trace.pool = poolStep.trace;
  if (!poolStep.ok) return rejectedWith(poolStep.rejection, { requestId, tenant: tenant.id, model: model.id, version: version.version }, trace);
  let pool = poolStep.value;
  const pinned = options.pinnedReplica;
  if (pinned && !pool.replicas.some((r) => r.id === pinned.id)) {
    // The stored response lives in another pool of this model version: it goes there.
    const home = generation.poolsOfVersion.get(version)?.find((p) => p.replicas.some((r) => r.id === pinned.id));
    if (!home) {
      trace.admit = { decidedBy: 'stored response', reason: `replica ${pinned.id} serves no pool of ${model.id}@${version.version}` };
      return rejectedWith(pinned.notFound, { requestId, tenant: tenant.id, model: model.id, version: version.version }, trace);
    }
    pool = home;
    trace.pool = { decidedBy: 'stored response', reason: `pool ${home.name} holds replica ${pinned.id}, which stored the previous response` };
  }

  // 3. Which replica: the pool's candidates (its overflow pool, then the
  // model's fallback, when it would refuse for capacity or shed), then the
  // strategy chain.
  const now = env.now();
  const { excludeReplicas, quotaTaken } = options;
  const input = { facts, tenant, level, generation, fleet, env, now, ruleFacts, excludeReplicas, quotaTaken, pinnedReplica: pinned };
  const placed = place(input, modelStep.value, pool, trace.pool, trace.model);
  if (placed.modelTrace) trace.model = placed.modelTrace;
  if (placed.poolTrace) trace.pool = placed.poolTrace;
  if (!placed.ok) {
    trace[placed.at] = placed.trace;
    return rejectedWith(placed.rejection, knownOf(requestId, tenant, level, placed.chosen), trace);
  }
  const routed = new Routed({ facts, settings: generation.settings, chosen: placed, tenant: tenant.id, priority, maxTokens, blockHashes: options.blockHashes });
  const replicaStep: ReplicaChoice = placed.pinned
    ? pinnedChoice(placed.pinned)
    : chooseReplica(routed, placed.pool, placed.candidates, options.pickBudgetMs ?? 1, env.clock, env.threadWait);
  trace.replica = replicaStep.trace;
  const { replica, run: chain } = replicaStep;

  // 4. Admit or reject. Quota is only looked at here: commit() takes it.
  const admission = admitStep(
    facts,
    tenant,
    generation,
    { pool: placed.pool, replica, priority: level, verdict: placed.verdict },
    env,
    now,
    options.quotaTaken === true,
  );
  trace.admit = admission.trace;
  if (!admission.ok) return rejectedWith(admission.rejection, knownOf(requestId, tenant, level, placed), trace, { pool: placed.pool, chain });
  const { adapter } = placed;
  return {
    ok: true,
    value: {
      requestId,
      status: 200,
      tenant: tenant.id,
      model: placed.model.id,
      version: placed.version.version,
      adapter,
      canary: placed.version.canary,
      pool: placed.pool.name,
      priority: level,
      replica: replica.id,
      replicaUrl: replica.url,
      upstreamModel: adapter ?? placed.model.id,
      reason: `${replicaStep.strategy}: ${replicaStep.trace.reason}`,
      strategy: replicaStep.strategy,
      shadowOverQuota: admission.value.shadowOverQuota || undefined,
      fallbackFrom: placed.fallbackFrom,
      modelledWaitMs: admission.value.modelledWaitMs,
    },
    trace,
    handles: { routed, pool: placed.pool, chain, tenant, charge: admission.value.charge, decidedAt: now },
  };
}

const NO_OPTIONS: DecideOptions = Object.freeze({});
const NO_PICKS: ReplicaChoice['run'] = Object.freeze({
  budgetMs: Infinity,
  pickMs: Object.freeze([]) as readonly number[],
  incidents: Object.freeze([]) as ReplicaChoice['run']['incidents'],
});

/** The flat facts rules see (docs/policies.md lists them), before a model is chosen. */
function requestRuleFacts(facts: RequestFacts, tenant: Tenant, priority: Priority, level: number, maxTokens: number): Record<string, unknown> {
  return {
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
}

/** What a refusal after the pool step knows. */
function knownOf(requestId: string, tenant: Tenant, level: number, on: ModelChoice & { readonly pool: Pool }) {
  return {
    requestId,
    tenant: tenant.id,
    model: on.model.id,
    version: on.version.version,
    adapter: on.adapter,
    canary: on.version.canary,
    pool: on.pool.name,
    priority: level,
  };
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

const NO_KEY = rejection('invalid_api_key', 'An API key is required: send "Authorization: Bearer <key>".');
const UNKNOWN_KEY = rejection(
  'invalid_api_key',
  'Incorrect API key provided. Send a key this router knows as "Authorization: Bearer <key>" (keys are configured in the tenants policy).',
);

/** The tenant of an API key hash (undefined: no key sent), or the 401 to answer. */
export function resolveTenant(generation: Generation, apiKeyHash: string | undefined): StepResult<Tenant> {
  const tenant = apiKeyHash !== undefined ? generation.tenantsByKeyHash.get(apiKeyHash) : generation.anonymousTenant;
  if (tenant) return { ok: true, value: tenant, trace: tenant.steps[tenantStepSlot(apiKeyHash !== undefined, false)] };
  const r = apiKeyHash !== undefined ? UNKNOWN_KEY : NO_KEY;
  return { ok: false, rejection: r, trace: { decidedBy: 'tenant lookup', reason: r.message } };
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

  constructor(parts: {
    readonly facts: RequestFacts;
    readonly settings: Generation['settings'];
    readonly chosen: Placement;
    readonly tenant: string;
    readonly priority: Priority;
    readonly maxTokens: number;
    readonly blockHashes: DecideOptions['blockHashes'];
  }) {
    const { facts, settings, chosen, tenant, priority, maxTokens, blockHashes } = parts;
    this.id = facts.requestId;
    this.model = chosen.model.id;
    this.version = chosen.version.version;
    this.adapter = chosen.adapter;
    this.pool = chosen.pool.name;
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
        ? chainBlockHashes(typeof blocks === 'function' ? blocks() : blocks, seed, prefixMaxBlocks)
        : prefixHashes(this.#facts.promptText, seed, prefixBlockChars, prefixMaxBlocks);
    }
    return this.#hashes;
  }
}
