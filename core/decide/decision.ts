// What decide() answers: a request admitted to a replica, or rejected with
// the error the client gets. A discriminated union on `admitted`: code that
// has checked it reads every field of its case without `!`.
import type { RoutedRequest } from '../../sdk/index.ts';
import type { Rejection } from '../errors.ts';
import type { Pool, Tenant } from './generation.ts';
import type { TokenCharge } from '../quota/cost.ts';
import type { StrategyFault } from './replica.ts';
import type { DecisionTrace } from './trace.ts';

/** A strategy that misbehaved while deciding; commit() reports it. */
export interface StrategyIncident {
  readonly strategy: string;
  readonly fault: StrategyFault;
  readonly detail: string;
}

/**
 * What running the pool's strategy chain leaves for commit() to do: the pick
 * times to count against the budget (aligned with the chain; NaN where a
 * strategy did not pick; empty when the budget is unlimited and nothing was
 * timed) and the faults to report.
 */
export interface ChainRun {
  readonly budgetMs: number;
  readonly pickMs: readonly number[];
  readonly incidents: readonly StrategyIncident[];
}

interface DecisionBase {
  readonly requestId: string;
  /** What picked the replica, or why the request was rejected. */
  readonly reason: string;
  readonly trace: DecisionTrace;
  /** The request's integer priority (core/facts/priority.ts), once the tenant is known. */
  readonly priority?: number;
  /** Set once the strategy chain ran (admitted, or rejected after it), with its pool. */
  readonly chain?: ChainRun;
  readonly poolRef?: Pool;
}

export interface Admitted extends DecisionBase {
  readonly admitted: true;
  readonly status: 200;
  readonly tenant: string;
  readonly model: string;
  readonly version: string;
  readonly adapter?: string;
  readonly canary: boolean;
  readonly pool: string;
  readonly replica: string;
  readonly replicaUrl: string;
  /** What to put in the body's `model` upstream: the adapter name for LoRA (vLLM's convention), else the model id. */
  readonly upstreamModel: string;
  /** The strategy that picked the replica. */
  readonly strategy: string;
  /** The request as the strategies saw it, and the pool: for commit(), retries and complete(). */
  readonly routed: RoutedRequest;
  readonly poolRef: Pool;
  readonly chain: ChainRun;
  readonly tenantRef: Tenant;
  /** The quota commit() takes, an estimate settled on usage once the engine answered; undefined on a retry, whose quota was taken already. */
  readonly charge?: TokenCharge;
  /** Admitted although over its tenant's shadow quota. */
  readonly shadowOverQuota?: true;
  /** The model the request was first routed to, when every pool of it refused for capacity and its fallback took the request. */
  readonly fallbackFrom?: string;
  /** The time to first token the policy's wait estimate expected (without the observed base latency): what a stream's first token teaches the base latency. */
  readonly modelledWaitMs: number;
}

export interface Rejected extends DecisionBase {
  readonly admitted: false;
  /** The HTTP status of the rejection. */
  readonly status: number;
  readonly rejection: Rejection;
  /** Known once the tenant was resolved, and so on for each later step. */
  readonly tenant?: string;
  readonly model?: string;
  readonly version?: string;
  readonly adapter?: string;
  readonly canary?: boolean;
  readonly pool?: string;
  /** Set for a cold-tier model: the router should ask for a load. */
  readonly action?: { readonly type: 'trigger_load'; readonly model: string; readonly url: string };
}

export type Decision = Admitted | Rejected;

/** The decision as plain JSON: what `explain --json` prints and /admin/decisions keeps. */
export function decisionJson(decision: Decision): Record<string, unknown> {
  const json: Record<string, unknown> = {
    requestId: decision.requestId,
    status: decision.status,
    tenant: decision.tenant ?? null,
    model: decision.model ?? null,
    version: decision.version ?? null,
    adapter: decision.adapter ?? null,
    canary: decision.canary ?? null,
    pool: decision.pool ?? null,
    priority: decision.priority ?? null,
    replica: decision.admitted ? decision.replica : null,
    reason: decision.reason,
  };
  if (!decision.admitted) {
    const r = decision.rejection;
    json.error = { code: r.code, type: r.type, message: r.message };
    if (r.retryAfterS !== undefined) json.retryAfter = r.retryAfterS;
    if (decision.action) json.action = decision.action;
  }
  json.trace = decision.trace;
  return json;
}
