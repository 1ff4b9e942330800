// The router's own watchers of its request lifecycle (request-lifecycle.ts):
// the metrics, the log line and the decision log (the explorer's live stream
// is fed by the decision log). Tracing subscribes from request-tracing.ts,
// the shadow policy and the recorder from request-observer.ts.
import type { DecisionLog } from '../observe/decision-log.ts';
import type { RouterMetrics } from '../observe/metrics.ts';
import { countShed } from './count-shed.ts';
import { countRejection } from './refusals.ts';
import type { RequestSubscriber } from './request-lifecycle.ts';
import { REQUEST_ID_FIELD } from './request-log.ts';
import type { FastifyBaseLogger } from 'fastify';
import { PlainLine } from '../observe/logger.ts';

/** The request metrics (docs/observability.md): decision time, replica decisions, upstream latency, requests by outcome, rejections, shedding, fallbacks. */
export function metricsSubscriber(metrics: RouterMetrics): RequestSubscriber {
  const { admission } = metrics;
  return {
    decided({ decision, retry, previous, decisionMs }) {
      if (!retry) metrics.decisionSeconds.record(decisionMs / 1000);
      if (!decision.ok) return;
      const { value } = decision;
      if (!retry && value.shadowOverQuota) admission.shadowOverQuota.inc({ tenant: value.tenant });
      // A retry counts a fallback only when it changed the model the request goes to.
      if (value.fallbackFrom && (!retry || value.upstreamModel !== previous?.value.upstreamModel))
        admission.fallbacks.inc({ from: value.fallbackFrom, to: value.model });
    },
    attemptStarted({ decision }) {
      metrics.decisions.add(1, decision.handles.pool.key, decision.value.replica, decision.value.strategy);
    },
    attemptEnded({ decision, result, durationMs }) {
      if (result.kind !== 'done' && result.kind !== 'broken') return;
      const pool = decision.handles.pool.key;
      metrics.ttfbSeconds.record(result.ttfbMs / 1000, pool);
      metrics.upstreamSeconds.record(durationMs / 1000, pool);
    },
    finished({ decision, refusal, outcome }) {
      if (refusal) {
        countRejection(metrics, refusal);
        countShed(metrics, refusal);
      } else if (decision.ok) metrics.requests.add(1, decision.value.model, decision.handles.pool.key, outcome);
    },
  };
}

/**
 * One log line per request: `routed`, or `rejected` when the router answered
 * with a rejection of its own. Written through the root logger with the
 * request id first, as request.log's bindings would put it: the same line,
 * without a pino child made for it (request-log.ts).
 */
export function logLineSubscriber(log: Pick<FastifyBaseLogger, 'info'>): RequestSubscriber {
  return {
    finished({ request, decision, refusal, outcome, status, retried, attempts, usage, failure, ttfbMs, durationMs }) {
      if (refusal) {
        const r = refusal.rejection;
        log.info({ [REQUEST_ID_FIELD]: request.id, status: r.status, reject: r.code, model: refusal.known.model, pool: refusal.known.pool }, 'rejected');
        return;
      }
      if (!decision.ok) return;
      const route = decision.value;
      const model = `${route.model}@${route.version}`;
      const ttfb = ttfbMs === undefined ? undefined : Math.round(ttfbMs);
      const duration = Math.round(durationMs);
      // The same line as below, without pino's walk of the fields (logger.ts); `usage` is an object: pino's own path.
      if (
        usage === undefined &&
        new PlainLine()
          .str(REQUEST_ID_FIELD, request.id)
          .str('model', model)
          .str('adapter', route.adapter)
          .str('pool', route.pool)
          .str('replica', route.replica)
          .str('strategy', route.strategy)
          .num('status', status)
          .str('outcome', outcome)
          .bool('retried', retried)
          .num('attempts', attempts)
          .str('failure', failure)
          .num('ttfbMs', ttfb)
          .num('durationMs', duration)
          .writeInfo(log, 'routed')
      )
        return;
      log.info(
        {
          [REQUEST_ID_FIELD]: request.id,
          model,
          adapter: route.adapter,
          pool: route.pool,
          replica: route.replica,
          strategy: route.strategy,
          status,
          outcome,
          retried,
          attempts,
          usage,
          failure,
          ttfbMs: ttfb,
          durationMs: duration,
        },
        'routed',
      );
    },
  };
}

/** Every decision, a retry's too, kept for /admin/decisions and sent to the explorer's live stream. */
export function decisionLogSubscriber(decisions: DecisionLog): RequestSubscriber {
  return {
    decided({ decision, facts }) {
      decisions.add(decision, facts);
    },
  };
}
