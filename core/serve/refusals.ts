// Every refused API request leaves the same three traces, whether decide()
// refused it or fastify did before any route ran (malformed JSON, a wrong
// content type, a body of the wrong shape): a log line (written where each
// is answered), the rejection metrics, and (for the latter) a decision record
// under its request id, so `/admin/decisions/ID` finds what the client was told.
import type { FastifyRequest } from 'fastify';
import { rejectedWith, type Rejected } from '../decide/decision.ts';
import type { Rejection } from '../errors.ts';
import type { DecisionLog } from '../observe/decision-log.ts';
import { poolLabel, type RouterMetrics } from '../observe/metrics.ts';

/** The rejection metrics of a refused request. */
export function countRejection(metrics: RouterMetrics, decision: Rejected): void {
  metrics.rejections.inc({ reason: decision.rejection.code });
  const { model, version, pool } = decision.known;
  metrics.requests.inc({ model: model ?? 'unknown', pool: pool && model && version ? poolLabel(model, version, pool) : 'none', outcome: 'rejected' });
}

/** A request refused before it reached decide(): counted and kept like a decided rejection (the error handler logs it). */
export function recordRefusal(deps: { metrics: RouterMetrics; decisions: DecisionLog }, request: FastifyRequest, r: Rejection): void {
  const decision = rejectedWith(r, { requestId: request.id }, { admit: { decidedBy: 'request check', reason: r.message } });
  countRejection(deps.metrics, decision);
  deps.decisions.add(decision);
}
