// OpenTelemetry traces of routed requests, off unless a Tracer is given:
// without one, the proxy calls nothing here. With one, each request is a
// SERVER span (continuing the client's W3C traceparent) with a child span for
// the decision and a CLIENT span per upstream attempt, named and attributed
// after OpenTelemetry's GenAI conventions (`chat llama-3-8b-instruct`,
// gen_ai.*), whose traceparent goes to the engine.
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

const propagator = new W3CTraceContextPropagator();
const headerGetter = {
  keys: (carrier: Record<string, unknown>) => Object.keys(carrier),
  get: (carrier: Record<string, unknown>, key: string) => {
    const value = carrier[key];
    return Array.isArray(value) ? value.map(String) : typeof value === 'string' ? value : undefined;
  },
};
const headerSetter = { set: (carrier: Record<string, string>, key: string, value: string) => void (carrier[key] = value) };

// GenAI operation names; vLLM's other routes are named after themselves.
const OPERATION: Record<string, string> = { chat: 'chat', completions: 'text_completion', embeddings: 'embeddings', responses: 'chat', messages: 'chat' };

/** What the decision chose, for the spans' attributes (undefined: not decided). */
export interface TracedDecision {
  readonly status: number;
  readonly tenant?: string;
  readonly model?: string;
  readonly version?: string;
  readonly adapter?: string;
  readonly pool?: string;
  readonly replica?: string;
  readonly strategy?: string;
  readonly canary?: boolean;
  readonly reason: string;
}

export class RequestTrace {
  private readonly span: Span;
  private readonly context: Context;
  private requestedModel: string | undefined;
  private decision: TracedDecision | undefined;

  constructor(
    private readonly tracer: Tracer,
    private readonly endpoint: string,
    route: string,
    headers: Record<string, unknown>,
    attributes: Attributes,
    /** When the request arrived (performance.timeOrigin based ms); now when absent. */
    startMs?: number,
  ) {
    const parent = propagator.extract(ROOT_CONTEXT, headers, headerGetter);
    this.span = tracer.startSpan(
      `POST ${route}`,
      {
        kind: SpanKind.SERVER,
        attributes: { 'http.request.method': 'POST', 'http.route': route, ...attributes },
        ...(startMs === undefined ? {} : { startTime: performance.timeOrigin + startMs }),
      },
      parent,
    );
    this.context = trace.setSpan(parent, this.span);
  }

  /** The decision, as a child span from `startMs` to `endMs` (performance.timeOrigin based ms). */
  decided(decision: TracedDecision, requestedModel: string | undefined, conversation: string | undefined, startMs: number, endMs: number): void {
    this.decision = decision;
    this.requestedModel = requestedModel;
    const attributes: Attributes = {
      'switchyard.status': decision.status,
      'switchyard.reason': decision.reason.slice(0, 256),
      ...(decision.tenant ? { 'switchyard.tenant': decision.tenant } : {}),
      ...(decision.model ? { 'switchyard.model': decision.model, 'switchyard.version': decision.version ?? '' } : {}),
      ...(decision.adapter ? { 'switchyard.adapter': decision.adapter } : {}),
      ...(decision.canary !== undefined ? { 'switchyard.canary': decision.canary } : {}),
      ...(decision.pool ? { 'switchyard.pool': decision.pool } : {}),
      ...(decision.replica ? { 'switchyard.replica': decision.replica } : {}),
      ...(decision.strategy ? { 'switchyard.strategy': decision.strategy } : {}),
      ...(requestedModel ? { 'gen_ai.request.model': requestedModel.slice(0, 256) } : {}),
      ...(conversation ? { 'gen_ai.conversation.id': conversation.slice(0, 128) } : {}),
    };
    this.span.setAttributes(attributes);
    const span = this.tracer.startSpan('switchyard.decide', { attributes, startTime: performance.timeOrigin + startMs }, this.context);
    if (decision.status !== 200) span.setStatus({ code: SpanStatusCode.ERROR, message: decision.reason.slice(0, 256) });
    span.end(performance.timeOrigin + endMs);
  }

  /** One upstream attempt: its CLIENT span, and the headers that carry its context to the engine. */
  attempt(replica: string, replicaUrl: string, attempt: number, maxTokens: number | undefined): UpstreamAttemptTrace {
    const url = safeUrl(replicaUrl);
    const model = this.decision?.model ?? this.requestedModel ?? 'unknown';
    const span = this.tracer.startSpan(
      `${OPERATION[this.endpoint] ?? this.endpoint} ${model}`,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          'gen_ai.operation.name': OPERATION[this.endpoint] ?? this.endpoint,
          'gen_ai.provider.name': 'switchyard',
          'gen_ai.request.model': this.decision?.adapter ?? model,
          ...(maxTokens !== undefined ? { 'gen_ai.request.max_tokens': maxTokens } : {}),
          ...(url ? { 'server.address': url.hostname, 'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)) } : {}),
          'switchyard.replica': replica,
          'switchyard.attempt': attempt,
        },
      },
      this.context,
    );
    return new UpstreamAttemptTrace(span, trace.setSpan(this.context, span));
  }

  end(httpStatus: number, outcome: string): void {
    this.span.setAttributes({ 'http.response.status_code': httpStatus, 'switchyard.outcome': outcome });
    if (httpStatus >= 500 || outcome === 'upstream_error') this.span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
    this.span.end();
  }
}

export class UpstreamAttemptTrace {
  constructor(
    private readonly span: Span,
    private readonly context: Context,
  ) {}

  /** traceparent (and tracestate) for the engine request. */
  headers(): Record<string, string> {
    const carrier: Record<string, string> = {};
    propagator.inject(this.context, carrier, headerSetter);
    return carrier;
  }

  end(status: number | undefined, error?: string, responseModel?: string): void {
    if (status !== undefined) this.span.setAttribute('http.response.status_code', status);
    if (responseModel) this.span.setAttribute('gen_ai.response.model', responseModel);
    if (error) this.span.setStatus({ code: SpanStatusCode.ERROR, message: error.slice(0, 256) });
    this.span.end();
  }
}

function safeUrl(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}
