// What decide() and each of its four steps answer, in one convention:
// `{ ok: true, value, trace }` or `{ ok: false, rejection, trace }`. A
// decision's explanation (value, or what was known before the refusal, and
// the trace) is plain JSON: what explain, the decision log and the explorer
// show. The runtime objects commit(), complete() and retries need (the
// request as strategies saw it, the pool and its chain, the tenant's quotas)
// live apart, in `handles`, and never reach JSON.
import type { RoutedRequest } from '../../sdk/index.ts';
import type { Rejection } from '../errors.ts';
import type { Pool, Tenant } from './generation.ts';
import type { TokenCharge } from '../quota/cost.ts';
import type { StrategyFault } from './replica.ts';
import type { DecisionTrace, StepTrace } from './trace.ts';

/** What one step (model, pool, replica, admit) answers. */
export type StepResult<T> = { readonly ok: true; readonly value: T; readonly trace: StepTrace } | StepRefusal;

export interface StepRefusal {
  readonly ok: false;
  readonly rejection: Rejection;
  readonly trace: StepTrace;
  /** Set for a cold-tier model: the router should ask for a load. */
  readonly action?: LoadAction;
}

export interface LoadAction {
  readonly type: 'trigger_load';
  readonly model: string;
  readonly url: string;
}

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
  /** Of an overrunning inline pick's time, what the router's thread waited for a CPU (core/decide/thread-wait.ts); absent when none was read. */
  readonly waitedMs?: readonly number[];
  readonly incidents: readonly StrategyIncident[];
}

/** What the steps chose before a refusal (each later step knows more), as plain JSON. */
export interface Known {
  readonly requestId: string;
  /** The HTTP status the client gets. */
  readonly status: number;
  /** What picked the replica, or why the request was rejected. */
  readonly reason: string;
  readonly tenant?: string;
  readonly model?: string;
  readonly version?: string;
  readonly adapter?: string;
  readonly canary?: boolean;
  readonly pool?: string;
  /** The request's integer priority (core/facts/priority.ts), once the tenant is known. */
  readonly priority?: number;
  /** Set for a cold-tier model: the router should ask for a load. */
  readonly action?: LoadAction;
}

/** Where an admitted request goes, as plain JSON. */
export interface Route extends Known {
  readonly status: 200;
  readonly tenant: string;
  readonly model: string;
  readonly version: string;
  readonly canary: boolean;
  readonly pool: string;
  readonly priority: number;
  readonly replica: string;
  readonly replicaUrl: string;
  /** What to put in the body's `model` upstream: the adapter name for LoRA (vLLM's convention), else the model id. */
  readonly upstreamModel: string;
  /** The strategy that picked the replica. */
  readonly strategy: string;
  /** Admitted although over its tenant's shadow quota. */
  readonly shadowOverQuota?: true;
  /** The model the request was first routed to, when every pool of it refused for capacity and its fallback took the request. */
  readonly fallbackFrom?: string;
  /** The time to first token the policy's wait estimate expected (without the observed base latency): what a stream's first token teaches the base latency. */
  readonly modelledWaitMs: number;
}

/** The runtime objects of a decision whose strategy chain ran: commit() counts its budgets even for a rejection. */
export interface ChainHandles {
  readonly pool: Pool;
  readonly chain: ChainRun;
}

/** The runtime objects of an admitted decision: for commit(), complete(), retries and usage settlement. */
export interface RouteHandles extends ChainHandles {
  /** The request as the strategies saw it. */
  readonly routed: RoutedRequest;
  readonly tenant: Tenant;
  /** The quota commit() takes, an estimate settled on usage once the engine answered; undefined on a retry, whose quota was taken already. */
  readonly charge?: TokenCharge;
  /** The wall-clock ms decide() read (env.now()): commit() takes the quota at the time its check saw. */
  readonly decidedAt: number;
}

export interface Admitted {
  readonly ok: true;
  readonly value: Route;
  readonly trace: DecisionTrace;
  readonly handles: RouteHandles;
}

export interface Rejected {
  readonly ok: false;
  readonly rejection: Rejection;
  readonly known: Known;
  readonly trace: DecisionTrace;
  /** Set once the strategy chain ran. */
  readonly handles?: ChainHandles;
}

export type Decision = Admitted | Rejected;

/** What a decision chose, whether admitted or not: a rejection knows only what its steps before the refusal chose. */
export function chosen(decision: Decision): Known {
  return decision.ok ? decision.value : decision.known;
}

/** A rejection decided outside decide() (a refused request head, a retry with nowhere left to go), with what was known. */
export function rejectedWith(r: Rejection, known: Omit<Known, 'status' | 'reason'>, trace: DecisionTrace = {}, handles?: ChainHandles): Rejected {
  return { ok: false, rejection: r, known: { ...known, status: r.status, reason: `${r.code}: ${r.message}` }, trace, handles };
}

/** The decision as plain JSON: what `explain --json` prints and /admin/decisions keeps. */
export function decisionJson(decision: Decision): Record<string, unknown> {
  const known = chosen(decision);
  const json: Record<string, unknown> = {
    requestId: known.requestId,
    status: known.status,
    tenant: known.tenant ?? null,
    model: known.model ?? null,
    version: known.version ?? null,
    adapter: known.adapter ?? null,
    canary: known.canary ?? null,
    pool: known.pool ?? null,
    priority: known.priority ?? null,
    replica: decision.ok ? decision.value.replica : null,
    reason: known.reason,
  };
  if (!decision.ok) {
    const r = decision.rejection;
    json.error = { code: r.code, type: r.type, message: r.message };
    if (r.retryAfterS !== undefined) json.retryAfter = r.retryAfterS;
    if (known.action) json.action = known.action;
  }
  json.trace = decision.trace;
  return json;
}
