// OpenTelemetry tracing as a subscriber of the request lifecycle
// (request-lifecycle.ts): a SERVER span per request from its arrival, a
// child span for its decision, a CLIENT span per upstream attempt whose
// context goes to the engine. OpenTelemetry's modules are loaded only when
// tracing is on: a router without it never reads them.
import type { Tracer } from '@opentelemetry/api';
import type { RequestTrace, UpstreamAttemptTrace } from '../observe/tracing.ts';
import type { RequestSubscriber } from './request-lifecycle.ts';

interface Traced {
  readonly trace: RequestTrace;
  attempt?: UpstreamAttemptTrace;
}

export async function tracingSubscriber(tracer: Tracer): Promise<RequestSubscriber> {
  const { RequestTrace } = await import('../observe/tracing.ts');
  // Keyed by the request: a request's spans live exactly as long as it does.
  const traces = new WeakMap<object, Traced>();
  return {
    decided({ request, endpoint, path, facts, decision, retry, startedAt, decidedAt, decisionMs }) {
      if (retry) return;
      const trace = new RequestTrace(tracer, endpoint, path, request.headers, { 'switchyard.request_id': request.id }, startedAt);
      traces.set(request, { trace });
      const known = decision.ok ? decision.value : decision.known;
      trace.decided(known, facts?.requestedModel, facts?.conversationId, decidedAt - decisionMs, decidedAt);
    },
    attemptStarted(message) {
      const traced = traces.get(message.request);
      if (!traced) return;
      traced.attempt = traced.trace.attempt(message.decision.value.replica, message.replicaUrl, message.attempt, message.maxTokens);
      message.traceHeaders = traced.attempt.headers();
    },
    attemptEnded({ request, decision, result }) {
      const traced = traces.get(request);
      if (!traced?.attempt) return;
      traced.attempt.end(
        result.kind === 'done' ? result.status : 'status' in result ? result.status : undefined,
        result.kind === 'done' ? undefined : result.kind === 'retryable' || result.kind === 'broken' ? result.cause : result.kind,
        decision.value.upstreamModel,
      );
      traced.attempt = undefined;
    },
    finished({ request, outcome, status }) {
      const traced = traces.get(request);
      if (!traced) return;
      traces.delete(request);
      // A client that went away got no status: 499, as proxies log it.
      traced.trace.end(status ?? 499, outcome);
    },
  };
}
