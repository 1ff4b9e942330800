// Decision 4 — admit or reject, without ever queueing at the router: over
// quota → 429; every candidate's engine queue full → 503 with Retry-After
// (the engine's scheduler, which knows more, should hold the queue); the
// estimated wait past the client's deadline → 503.
import type { Candidate } from '../../sdk/index.ts';
import { rejection, type Rejection } from '../errors.ts';
import type { Pool, Generation, Tenant } from './generation.ts';
import type { RequestFacts } from '../facts/request-facts.ts';
import { admissionCost, type TokenCharge } from '../quota/cost.ts';
import type { QuotaCost, QuotaStore } from './quota.ts';
import type { StepResult } from './decision.ts';
import type { DecideEnv } from './env.ts';
import type { ShedVerdict } from './shed.ts';

/**
 * What one request costs against its tenant's quota at admission: the prompt
 * plus the most it may generate (core/quota/cost.ts), on `pool`'s context
 * length; before the pool is known, on the longest of any pool, so that what
 * a shared store prepares covers what decide() then asks.
 */
export function quotaCost(facts: RequestFacts, tenant: Tenant, snapshot: Generation, pool?: Pool): TokenCharge {
  const { weights } = tenant.quotas;
  const defaultMax = snapshot.settings.defaultMaxTokens;
  if (pool) return admissionCost(facts, weights, pool.maxModelLen, defaultMax);
  const { longest, unlimited } = contexts(snapshot);
  const bounded = admissionCost(facts, weights, longest, defaultMax);
  if (!unlimited) return bounded;
  const other = admissionCost(facts, weights, undefined, defaultMax);
  return other.tokens > bounded.tokens ? other : bounded;
}

const contextsOf = new WeakMap<Generation, { longest?: number; unlimited: boolean }>();

/** The longest max_model_len of any pool, and whether some pool has none (default_max_tokens stands in there). */
function contexts(snapshot: Generation): { longest?: number; unlimited: boolean } {
  let known = contextsOf.get(snapshot);
  if (!known) {
    let longest: number | undefined;
    let unlimited = false;
    for (const pool of snapshot.pools) {
      if (pool.maxModelLen === undefined) unlimited = true;
      else longest = Math.max(longest ?? 0, pool.maxModelLen);
    }
    known = { longest, unlimited };
    contextsOf.set(snapshot, known);
  }
  return known;
}

export function quotaRejection(store: QuotaStore, tenant: Tenant, cost: QuotaCost, now: number): Rejection | undefined {
  const verdict = store.check(tenant.id, cost, tenant.quotas, now);
  if (verdict.ok) return undefined;
  if (verdict.limit === 'unavailable') {
    return rejection('quota_unavailable', `The shared quota store cannot be reached and quotas fail closed. Retry after ${verdict.retryAfterS} s.`, {
      retryAfterS: verdict.retryAfterS,
    });
  }
  const limit = verdict.limit === 'requests' ? `${tenant.quotas.requestsPerMinute} requests` : `${tenant.quotas.tokensPerMinute} tokens`;
  return rejection('quota_exceeded', `Tenant "${tenant.id}" is over its quota of ${limit} per minute. Retry after ${verdict.retryAfterS} s.`, {
    retryAfterS: verdict.retryAfterS,
  });
}

export function capacityRejection(pool: Pool, candidates: readonly Candidate[]): Rejection | undefined {
  if (candidates.length === 0) return undefined;
  for (const c of candidates) if (c.signals.queueDepth < pool.capacity.queueDepth) return undefined;
  return rejection(
    'no_capacity',
    `Every replica of pool ${pool.name} (${pool.model}@${pool.version}) has ${pool.capacity.queueDepth} or more requests waiting. Retry after ${pool.capacity.retryAfterS} s.`,
    { retryAfterS: pool.capacity.retryAfterS },
  );
}

/**
 * Time to first token the router expects on `replica` from the policy's
 * model alone: the pool's base latency (wait_estimate.base_ms), its queue,
 * then the prefill. The observed base latency comes on top (deadlineRejection).
 */
export function estimatedWaitMs(pool: Pool, replica: Candidate, promptTokens: number): number {
  const wait = pool.waitEstimate;
  return wait.baseMs + replica.signals.queueDepth * wait.msPerQueuedRequest + (promptTokens / 1000) * wait.prefillMsPer1kTokens;
}

/** `modelledMs` (estimatedWaitMs) plus the pool's observed base latency: past the client's deadline, 503. */
export function deadlineRejection(modelledMs: number, observedBaseMs: number | undefined, deadlineMs: number | undefined): Rejection | undefined {
  if (deadlineMs === undefined) return undefined;
  const wait = modelledMs + (observedBaseMs ?? 0);
  if (wait <= deadlineMs) return undefined;
  const observed = observedBaseMs === undefined ? '' : ` (${Math.round(observedBaseMs)} ms of it the base latency the pool's recent first tokens showed)`;
  return rejection(
    'deadline_unmeetable',
    `The first token is expected in about ${Math.round(wait)} ms${observed}, past the ${deadlineMs} ms deadline in x-deadline-ms. Allow more time, or retry when the pool is less busy.`,
    { retryAfterS: 1 },
  );
}

/** What admitting a request settles: the quota to take, and the wait the policy's model expects. */
export interface Admission {
  /** Undefined on a retry: its quota was taken already. */
  readonly charge?: TokenCharge;
  readonly shadowOverQuota: boolean;
  readonly modelledWaitMs: number;
}

/**
 * Decision 4 on the chosen replica: the tenant's quota (a shadow quota counts,
 * never refuses), then the client's deadline. `verdict` is the shedding draw
 * the request survived, reported in the trace.
 */
export function admitStep(
  facts: RequestFacts,
  tenant: Tenant,
  generation: Generation,
  on: { readonly pool: Pool; readonly replica: Candidate; readonly priority: number; readonly verdict?: ShedVerdict },
  env: DecideEnv,
  now: number,
  quotaTaken: boolean,
): StepResult<Admission> {
  const { pool, replica, verdict } = on;
  const cost = quotaCost(facts, tenant, generation, pool);
  const overQuota = quotaTaken ? undefined : quotaRejection(env.quota, tenant, cost, now);
  // A shadow quota counts and reports, never refuses (docs/quotas.md).
  const shadowOver = overQuota !== undefined && tenant.quotas.shadow;
  if (overQuota && !shadowOver)
    return { ok: false, rejection: overQuota, trace: { decidedBy: 'quota', reason: overQuota.message, facts: { tokens: cost.tokens } } };
  const modelledWaitMs = estimatedWaitMs(pool, replica, facts.promptTokens);
  const observedBaseMs = env.baseLatencyMs?.(pool.key);
  const late = deadlineRejection(modelledWaitMs, observedBaseMs, facts.deadlineMs);
  if (late) {
    return {
      ok: false,
      rejection: late,
      trace: {
        decidedBy: 'deadline',
        reason: late.message,
        facts: {
          deadlineMs: facts.deadlineMs,
          estimatedWaitMs: Math.round(modelledWaitMs + (observedBaseMs ?? 0)),
          observedBaseMs: observedBaseMs === undefined ? null : Math.round(observedBaseMs),
        },
      },
    };
  }
  const admitFacts: Record<string, unknown> = {
    estimatedWaitMs: Math.round(modelledWaitMs + (observedBaseMs ?? 0)),
    deadlineMs: facts.deadlineMs ?? null,
    priority: on.priority,
  };
  if (observedBaseMs !== undefined) admitFacts.observedBaseMs = Math.round(observedBaseMs);
  // A sheddable request that was not shed says how close it came.
  if (verdict && verdict.probability > 0) {
    admitFacts.saturation = round2(verdict.saturation);
    admitFacts.shedProbability = round2(verdict.probability);
  }
  if (shadowOver) admitFacts.shadowQuota = overQuota.message;
  return {
    ok: true,
    value: { charge: quotaTaken ? undefined : cost, shadowOverQuota: shadowOver, modelledWaitMs },
    trace: {
      decidedBy: 'admitted',
      reason: shadowOver ? 'within capacity and deadline; over its shadow quota (not enforced)' : 'within quota, capacity and deadline',
      facts: admitFacts,
    },
  };
}

export const round2 = (x: number) => Math.round(x * 100) / 100;
