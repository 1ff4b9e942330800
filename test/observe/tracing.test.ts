// OpenTelemetry tracing, with an in-memory exporter: a request is a SERVER
// span continuing the client's traceparent, with a decision span and a GenAI
// CLIENT span per upstream attempt, and the engine receives the attempt's
// traceparent. Off (no tracer), nothing is exported and no traceparent sent.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { OPEN_TENANTS, startTestRouter, TINY_MODELS, until } from '../helpers/router.ts';

interface FakeEngine {
  server: Server;
  url: string;
  seen: IncomingHttpHeaders[];
}

/** An engine that answers health and metrics, and every completion with `status`. */
async function fakeEngine(status: number): Promise<FakeEngine> {
  const seen: IncomingHttpHeaders[] = [];
  const server = createServer((req, res) => {
    if (req.method === 'GET') return void res.end(req.url === '/metrics' ? 'vllm:num_requests_running{model_name="tiny"} 0\n' : 'ok');
    seen.push(req.headers);
    req.resume();
    req.on('end', () => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(
        status === 200
          ? JSON.stringify({
              id: 'x',
              object: 'chat.completion',
              created: 0,
              model: 'tiny',
              choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
            })
          : '{"error":{"message":"boom"}}',
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, seen };
}

const pools = (failing: string, healthy: string) =>
  `kind: pools\npools:\n  - name: general\n    model: tiny\n    version: v1\n    strategies: [round-robin]\n    replicas:\n      - { id: bad, url: "${failing}" }\n      - { id: good, url: "${healthy}" }\n`;

test('a traced request: server span from the client traceparent, a decision span, a GenAI client span per attempt, traceparent to the engine', {
  timeout: 60_000,
}, async (t) => {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const bad = await fakeEngine(500);
  const good = await fakeEngine(200);
  const router = await startTestRouter(
    { 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': pools(bad.url, good.url) },
    { tracer: provider.getTracer('test') },
  );
  t.after(async () => {
    await router.close();
    bad.server.close();
    good.server.close();
    await provider.shutdown();
  });
  await until(
    async () =>
      ((await (await fetch(`${router.adminUrl}/admin/state`)).json()) as { replicas: { health: string }[] }).replicas.every((r) => r.health === 'ready'),
    10_000,
    'replicas ready',
  );

  const clientTrace = '0af7651916cd43dd8448eb211c80319c';
  const clientSpan = 'b7ad6b7169203331';
  // Round robin: of two requests, one goes to the failing engine first and is retried on the good one.
  for (let i = 0; i < 2; i++) {
    const response = await fetch(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: 'Bearer sk-test',
        traceparent: `00-${clientTrace}-${clientSpan}-01`,
        'x-conversation-id': `c-${i}`,
      },
      body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: 7 }),
    });
    assert.equal(response.status, 200);
    await response.arrayBuffer();
  }
  await until(() => exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.SERVER).length === 2, 5000, 'two server spans');
  const spans = exporter.getFinishedSpans();
  const servers = spans.filter((s) => s.kind === SpanKind.SERVER);
  for (const server of servers) {
    assert.equal(server.name, 'POST /v1/chat/completions');
    assert.equal(server.spanContext().traceId, clientTrace, "the client's trace goes on");
    assert.equal(server.parentSpanContext?.spanId, clientSpan);
    assert.equal(server.attributes['switchyard.pool'], 'general');
    assert.equal(server.attributes['http.response.status_code'], 200);
  }
  const childrenOf = (parent: ReadableSpan) => spans.filter((s) => s.parentSpanContext?.spanId === parent.spanContext().spanId);
  const retried = servers.find((s) => childrenOf(s).filter((c) => c.kind === SpanKind.CLIENT).length === 2);
  assert.ok(retried, 'one request has two attempt spans');
  const decide = childrenOf(retried!).find((c) => c.name === 'switchyard.decide');
  assert.ok(decide, 'a decision span');
  assert.equal(decide!.attributes['switchyard.strategy'], 'round-robin');
  assert.equal(decide!.attributes['gen_ai.request.model'], 'tiny');
  const attempts = childrenOf(retried!)
    .filter((c) => c.kind === SpanKind.CLIENT)
    .sort((a, b) => Number(a.attributes['switchyard.attempt']) - Number(b.attributes['switchyard.attempt']));
  for (const a of attempts) {
    assert.equal(a.name, 'chat tiny');
    assert.equal(a.attributes['gen_ai.operation.name'], 'chat');
    assert.equal(a.attributes['gen_ai.request.model'], 'tiny');
    assert.equal(a.attributes['gen_ai.request.max_tokens'], 7);
    assert.equal(a.attributes['server.address'], '127.0.0.1');
  }
  assert.deepEqual(
    attempts.map((a) => a.attributes['switchyard.replica']),
    ['bad', 'good'],
  );
  assert.equal(attempts[0].status.code, SpanStatusCode.ERROR);
  assert.equal(attempts[0].attributes['http.response.status_code'], 500);
  assert.notEqual(attempts[1].status.code, SpanStatusCode.ERROR);

  // Each engine saw the traceparent of the attempt that reached it.
  const sentTo = (engine: FakeEngine) => engine.seen.map((h) => String(h.traceparent));
  assert.ok(sentTo(bad).includes(`00-${clientTrace}-${attempts[0].spanContext().spanId}-01`));
  assert.ok(sentTo(good).includes(`00-${clientTrace}-${attempts[1].spanContext().spanId}-01`));
});

test('tracing off: the engine gets no traceparent and the router runs no tracing code', { timeout: 60_000 }, async (t) => {
  const good = await fakeEngine(200);
  const router = await startTestRouter({
    'models.yaml': TINY_MODELS,
    'tenants.yaml': OPEN_TENANTS,
    'pools.yaml': pools(good.url, good.url).replace(/id: good, url: "[^"]+"/, 'id: good, url: "http://127.0.0.1:9"'),
  });
  t.after(async () => {
    await router.close();
    good.server.close();
  });
  await router.client.chat.completions
    .create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'x-conversation-id': 'off' } })
    .catch(() => undefined);
  await until(() => good.seen.length > 0, 10_000, 'the engine to be asked');
  assert.equal(good.seen[0].traceparent, undefined);
});
