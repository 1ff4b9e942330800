// `serve --tracing otlp`: OpenTelemetry's SDK with the OTLP/HTTP exporter,
// configured the standard way (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS, ...).
// Spans are batched off the request path; a parent's sampling decision is
// kept, and new traces are sampled at the given ratio. serve imports this
// file only with --tracing on: OpenTelemetry is not loaded otherwise.
import type { Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';

export interface Tracing {
  readonly tracer: Tracer;
  /** Sends what is still buffered, then stops. */
  shutdown(): Promise<void>;
}

export function startTracing(exporter: 'otlp' | 'console', sampleRatio: number, serviceVersion: string): Tracing {
  const spanExporter: SpanExporter = exporter === 'otlp' ? new OTLPTraceExporter() : new ConsoleSpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': process.env.OTEL_SERVICE_NAME || 'switchyard', 'service.version': serviceVersion }),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(sampleRatio) }),
    spanProcessors: [new BatchSpanProcessor(spanExporter)],
  });
  return { tracer: provider.getTracer('switchyard', serviceVersion), shutdown: () => provider.shutdown() };
}
