// Decision 3 — which replica, around the strategy chain (replica.ts): the
// pool's candidates, and when the pool would refuse for capacity or shed the
// request's priority, its overflow pool and then the model's fallback (both
// validated loop-free, and bounded here); a pinned request (a Responses API
// follow-up) goes to the one replica holding its previous response.
import type { Candidate } from '../../sdk/index.ts';
import { rejection, type Rejection } from '../errors.ts';
import type { RequestFacts } from '../facts/request-facts.ts';
import type { FleetView } from '../fleet/types.ts';
import type { Facts } from '../rules/compile.ts';
import { capacityRejection, round2 } from './admit.ts';
import { buildCandidates, type CandidateSet } from './candidates.ts';
import type { StepRefusal } from './decision.ts';
import type { DecideEnv } from './env.ts';
import { fallbackModel, fallbackStep, MAX_FALLBACKS } from './fallback.ts';
import type { Generation, ModelVersion, Pool, Tenant } from './generation.ts';
import type { ModelChoice } from './model.ts';
import { choosePool } from './pool.ts';
import type { ReplicaChoice } from './replica.ts';
import { shed, type ShedVerdict } from './shed.ts';
import type { StepTrace, TraceAlternative } from './trace.ts';

/** What the request is placed on before the chain picks: the model (a fallback may have replaced it), the pool and its candidates. */
export interface Placement extends ModelChoice {
  readonly ok: true;
  readonly pool: Pool;
  readonly candidates: CandidateSet;
  /** The shedding draw the request survived, when its priority is sheddable. */
  readonly verdict?: ShedVerdict;
  /** The model first chosen, when its fallback took the request. */
  readonly fallbackFrom?: string;
  /** A pinned request's replica: no strategy is asked. */
  readonly pinned?: Candidate;
  /** The model and pool steps as overflow and fallback left them. */
  readonly modelTrace?: StepTrace;
  readonly poolTrace?: StepTrace;
}

/** A placement refused: the trace of the step that refused (`at`), and what was chosen by then. */
export interface PlacementRefusal extends StepRefusal {
  readonly at: 'replica' | 'admit';
  readonly chosen: ModelChoice & { readonly pool: Pool };
  readonly modelTrace?: StepTrace;
  readonly poolTrace?: StepTrace;
}

export interface PlaceInput {
  readonly facts: RequestFacts;
  readonly tenant: Tenant;
  readonly level: number;
  readonly generation: Generation;
  readonly fleet: FleetView;
  readonly env: DecideEnv;
  readonly now: number;
  readonly excludeReplicas?: ReadonlySet<string>;
  readonly quotaTaken?: boolean;
  readonly pinnedReplica?: { readonly id: string; readonly notFound: Rejection };
  /** The rule facts of the request, before any model is chosen (pool rules see the model on top). */
  readonly ruleFacts: Facts;
}

/** Overflow hops followed at most; compiled policies have no loops, this only bounds the walk. */
const MAX_OVERFLOW_HOPS = 8;

export function place(input: PlaceInput, first: ModelChoice, firstPool: Pool, poolTrace: StepTrace, modelTrace: StepTrace): Placement | PlacementRefusal {
  const { facts, generation, fleet, env, now, level, excludeReplicas } = input;
  const { maxStalenessMs } = generation.settings;
  let { model, version, adapter } = first;
  let pool = firstPool;
  const pinned = input.pinnedReplica;
  if (pinned) {
    // A follow-up goes to the one engine holding its previous response, whatever its checks say: only a
    // replica gone from the policy, or one that already failed this request, cannot take it. No overflow, no shedding.
    const candidates = buildCandidates(pool, fleet, now, maxStalenessMs, excludeReplicas);
    const home = candidates.candidates.find((c) => c.id === pinned.id) ?? (excludeReplicas?.has(pinned.id) ? undefined : standIn(pool, pinned.id));
    if (!home) {
      const trace = {
        decidedBy: 'stored response',
        reason: `replica ${pinned.id} stored the previous response and cannot take it now`,
        alternatives: candidates.excluded,
      };
      return { ok: false, rejection: pinned.notFound, trace, at: 'replica', chosen: { model, version, adapter, pool } };
    }
    return { ok: true, model, version, adapter, pool, candidates, pinned: home };
  }
  const requiredTokens = facts.promptTokens + (facts.maxTokens ?? 0);
  let fallbackFrom: string | undefined;
  let fallbacks = 0;
  let changedModel: StepTrace | undefined;
  let changedPool: StepTrace | undefined;
  for (let hops = 0; ; hops++) {
    const candidates = buildCandidates(pool, fleet, now, maxStalenessMs, excludeReplicas);
    if (candidates.candidates.length === 0) {
      const r = rejection('no_healthy_replica', `No replica of pool ${pool.name} (${model.id}@${version.version}) is ready. Retry after 5 s.`, {
        retryAfterS: 5,
      });
      const trace = { decidedBy: 'filters', reason: 'every replica is excluded', alternatives: candidates.excluded };
      return { ok: false, rejection: r, trace, at: 'replica', chosen: { model, version, adapter, pool }, modelTrace: changedModel, poolTrace: changedPool };
    }
    const full = capacityRejection(pool, candidates.candidates);
    // A retry was admitted once already: it is not shed the second time.
    const verdict = full || input.quotaTaken ? undefined : shed(pool, candidates.candidates, level, env.random);
    const refused = full ?? verdict?.rejection;
    if (!refused) return { ok: true, model, version, adapter, pool, candidates, verdict, fallbackFrom, modelTrace: changedModel, poolTrace: changedPool };
    const why = full ? 'at capacity' : `shedding priority ${level}`;
    const next = hops < MAX_OVERFLOW_HOPS ? overflowOf(pool, generation, version, requiredTokens) : undefined;
    if (next) {
      changedPool = overflowStep(changedPool ?? poolTrace, pool, next, full ? why : `${why} (p=${round2(verdict!.probability)})`);
      pool = next;
      continue;
    }
    const fallback = fallbacks < MAX_FALLBACKS ? fallbackModel(model, input.tenant, generation, facts, env) : undefined;
    let notFallen: string | undefined = typeof fallback === 'string' ? fallback : undefined;
    if (fallback !== undefined && typeof fallback !== 'string') {
      const fallbackPool = choosePool(fallback.model.id, fallback.version, withModel(input.ruleFacts, fallback), requiredTokens, generation);
      if (fallbackPool.ok) {
        changedModel = fallbackStep(changedModel ?? modelTrace, model.id, fallback, `${pool.name} ${why}`);
        changedPool = fallbackPool.trace;
        fallbackFrom ??= model.id;
        fallbacks++;
        ({ model, version, adapter } = fallback);
        pool = fallbackPool.value;
        continue;
      }
      notFallen = `fallback ${fallback.model.id}: ${fallbackPool.rejection.message}`;
    }
    let trace: StepTrace = full
      ? {
          decidedBy: 'capacity',
          reason: full.message,
          alternatives: candidates.candidates.map((c) => ({ name: c.id, score: c.signals.queueDepth, note: 'queue depth' })),
        }
      : {
          decidedBy: 'shedding',
          reason: refused.message,
          facts: { priority: level, saturation: round2(verdict!.saturation), shedProbability: round2(verdict!.probability) },
        };
    if (notFallen) trace = { ...trace, facts: { ...trace.facts, noFallback: notFallen } };
    return { ok: false, rejection: refused, trace, at: 'admit', chosen: { model, version, adapter, pool }, modelTrace: changedModel, poolTrace: changedPool };
  }
}

/** The facts pool rules see: the request's, with the chosen model on top (a new record: the request's stays as it was). */
export function withModel(ruleFacts: Facts, choice: ModelChoice): Facts {
  return { ...ruleFacts, resolvedModel: choice.model.id, version: choice.version.version, canary: choice.version.canary, adapter: choice.adapter ?? null };
}

/** A pinned replica its checks exclude (failing, ejected, draining): a candidate with no signals, sent to anyway. */
function standIn(pool: Pool, id: string): ReplicaChoice['replica'] | undefined {
  const spec = pool.replicas.find((r) => r.id === id);
  if (!spec) return undefined;
  const signals = { kvUsage: 0, queueDepth: 0, running: 0, inFlight: 0, loadedAdapters: spec.adapters, ageMs: Infinity, stale: true };
  return { id: spec.id, url: spec.url, engine: spec.engine, saturated: false, signals, capacity: spec.capacity };
}

/** The pool `pool` overflows into, if it exists and the request fits its length limit. */
function overflowOf(pool: Pool, generation: Generation, version: ModelVersion, requiredTokens: number): Pool | undefined {
  if (pool.overflow === undefined) return undefined;
  for (const p of generation.poolsOfVersion.get(version) ?? []) {
    if (p.name === pool.overflow) return p.maxModelLen === undefined || requiredTokens <= p.maxModelLen ? p : undefined;
  }
  return undefined;
}

function overflowStep(step: StepTrace, from: Pool, to: Pool, why: string): StepTrace {
  const alternatives: TraceAlternative[] = [...(step.alternatives ?? []), { name: from.name, note: why }];
  return { decidedBy: 'overflow', reason: `${step.reason}; ${from.name} ${why} → overflow to ${to.name}`, facts: step.facts, alternatives };
}
