// Every refused API request leaves the same three traces, whether decide()
// refused it or fastify did before any route ran (malformed JSON, a wrong
// content type, a body of the wrong shape): a log line, the rejection
// metrics, and (for the latter) a decision record under its request id, so
// `/admin/decisions/ID` finds what the client was told.
import type { FastifyRequest } from 'fastify';
import type { Rejected } from '../decide/decision.ts';
import type { Rejection } from '../errors.ts';
import type { DecisionLog } from '../observe/decision-log.ts';
import { poolLabel, type RouterMetrics } from '../observe/metrics.ts';

/** The metrics and the log line of a rejection. */
export function countRejection(metrics: RouterMetrics, request: FastifyRequest, decision: Rejected): void {
  const r = decision.rejection;
  metrics.rejections.inc({ reason: r.code });
  const pool = decision.pool && decision.model && decision.version ? poolLabel(decision.model, decision.version, decision.pool) : 'none';
  metrics.requests.inc({ model: decision.model ?? 'unknown', pool, outcome: 'rejected' });
  request.log.info({ status: r.status, reject: r.code, model: decision.model, pool: decision.pool, reason: r.message.slice(0, 300) }, 'rejected');
}

/** A request refused before it reached decide(): counted, logged and kept like a decided rejection. */
export function recordRefusal(deps: { metrics: RouterMetrics; decisions: DecisionLog }, request: FastifyRequest, r: Rejection): void {
  const decision: Rejected = {
    admitted: false,
    requestId: request.id,
    status: r.status,
    reason: `${r.code}: ${r.message}`,
    rejection: r,
    trace: { admit: { decidedBy: 'request check', reason: r.message } },
  };
  countRejection(deps.metrics, request, decision);
  deps.decisions.add(decision);
}
