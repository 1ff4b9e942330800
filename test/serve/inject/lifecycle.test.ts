// The request lifecycle as outside instrumentation sees it: every event of a
// real request on node:diagnostics_channel (docs/observability.md), a retry's
// included, and a rejection's; a throwing subscriber of the router's own
// lifecycle never changes what the client gets, and the other subscribers
// still hear of the request.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import diagnostics_channel from 'node:diagnostics_channel';
import { createServer } from 'node:net';
import { decisionJson } from '../../../core/decide/decision.ts';
import { REQUEST_CHANNELS, type RequestDecided, type RequestFinished } from '../../../core/serve/request-lifecycle.ts';
import { buildInjectRouter, errorOf } from '../../helpers/inject.ts';
import { OPEN_TENANTS, TINY_MODELS } from '../../helpers/router.ts';

async function deadUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

const pools = (replicas: string[]) =>
  'kind: pools\npools:\n  - name: general\n    model: tiny\n    version: v1\n    limits: { max_model_len: 1024 }\n    strategies: [round-robin]\n    replicas:\n' +
  replicas.map((url, i) => `      - { id: r${i}, url: "${url}" }\n`).join('');
const files = (replicas: string[]) => ({ 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': pools(replicas) });
const chat = { model: 'tiny', messages: [{ role: 'user' as const, content: 'hi' }], max_tokens: 2 };
const slowChecks = { scrapeIntervalMs: 3_600_000, healthIntervalMs: 3_600_000 };

/** Every lifecycle message on the four channels, in order, as [event, message]; unsubscribe() stops listening. */
function listen(): { events: [string, Record<string, unknown>][]; of(id: string): [string, Record<string, unknown>][]; unsubscribe(): void } {
  const events: [string, Record<string, unknown>][] = [];
  const handlers = Object.entries(REQUEST_CHANNELS).map(([event, name]) => {
    const handler = (message: unknown) => void events.push([event, message as Record<string, unknown>]);
    diagnostics_channel.subscribe(name, handler);
    return [name, handler] as const;
  });
  return {
    events,
    of: (id) => events.filter(([, m]) => (m.request as { id: string }).id === id),
    unsubscribe: () => {
      for (const [name, handler] of handlers) diagnostics_channel.unsubscribe(name, handler);
    },
  };
}

test('an outside diagnostics_channel subscriber sees each event of a retried request, in order, with the decisions as plain JSON', async () => {
  const t = await buildInjectRouter(files([await deadUrl(), 'emulate://tiny']), slowChecks);
  const seen = listen();
  try {
    // Round robin sends one of the first two requests to the dead r0 first: that one is retried on r1.
    const answers = [await t.post('/v1/chat/completions', chat), await t.post('/v1/chat/completions', chat)];
    for (const answer of answers) assert.equal(answer.statusCode, 200, answer.body);
    const retried = answers.find((a) => a.headers['x-switchyard-retried'] === 'true');
    assert.ok(retried, 'one request was retried');
    const id = String(retried.headers['x-request-id']);
    const events = seen.of(id);
    assert.deepEqual(
      events.map(([event]) => event),
      ['decided', 'attemptStarted', 'attemptEnded', 'decided', 'attemptStarted', 'attemptEnded', 'finished'],
    );
    const [first, , firstEnd, retry, , , finished] = events.map(([, m]) => m);
    assert.equal((first as unknown as RequestDecided).retry, false);
    assert.equal((retry as unknown as RequestDecided).retry, true);
    assert.deepEqual(firstEnd.result, { kind: 'retryable', cause: 'connect', detail: (firstEnd.result as { detail: string }).detail });
    const end = finished as unknown as RequestFinished;
    assert.equal(end.status, 200, 'the status the client got, computed once');
    assert.equal(end.outcome, 'ok');
    assert.equal(end.attempts, 2);
    assert.equal(end.retried, true);
    // The explanation survives JSON as it is: no runtime handle in it.
    const json = JSON.parse(JSON.stringify(decisionJson(end.decision)));
    assert.equal(json.replica, 'r1');
    assert.equal(json.requestId, id);
    assert.deepEqual(JSON.parse(JSON.stringify(end.decision.ok ? end.decision.value : null)).replica, 'r1');
  } finally {
    seen.unsubscribe();
    await t.close();
  }
});

test('a rejection is decided and finished, with no attempt; the refusal is what the client got', async () => {
  const t = await buildInjectRouter(files(['emulate://tiny']), slowChecks);
  const seen = listen();
  try {
    const answer = await t.post('/v1/chat/completions', { ...chat, model: 'no-such-model' });
    assert.equal(answer.statusCode, 404);
    assert.equal(errorOf(answer).code, 'model_not_found');
    const events = seen.of(String(answer.headers['x-request-id']));
    assert.deepEqual(
      events.map(([event]) => event),
      ['decided', 'finished'],
    );
    const end = events[1][1] as unknown as RequestFinished;
    assert.equal(end.outcome, 'rejected');
    assert.equal(end.status, 404);
    assert.equal(end.refusal?.rejection.code, 'model_not_found');
  } finally {
    seen.unsubscribe();
    await t.close();
  }
});

test("a subscriber of the router's lifecycle that throws on every event changes nothing the client gets; the others still hear of the request", async () => {
  const t = await buildInjectRouter(files(['emulate://tiny']), slowChecks);
  const seen = listen();
  let throws = 0;
  const boom = () => {
    throws++;
    throw new Error('subscriber bug');
  };
  t.router.lifecycle.subscribe({ decided: boom, attemptStarted: boom, attemptEnded: boom, finished: boom });
  try {
    const completion = await t.client.chat.completions.create(chat);
    assert.equal(completion.usage?.completion_tokens, 2);
    assert.equal(throws, 4, 'called on each of the four events');
    assert.deepEqual(
      seen.events.map(([event]) => event),
      ['decided', 'attemptStarted', 'attemptEnded', 'finished'],
    );
    // The router's own subscribers ran too: the decision log kept it, the metrics counted it.
    const requestId = (seen.events[0][1].request as { id: string }).id;
    assert.ok(
      t.router.decisions.recent(5).some((entry) => entry.requestId === requestId),
      'the decision log kept the decision',
    );
    const metrics = (await t.admin({ method: 'GET', url: '/metrics' })).body;
    assert.match(metrics, /switchyard_requests_total\{model="tiny",pool="tiny@v1\/general",outcome="ok"\} 1/);
    assert.match(metrics, /switchyard_replica_decisions_total\{pool="tiny@v1\/general",replica="r0",strategy="round-robin"\} 1/);
  } finally {
    seen.unsubscribe();
    await t.close();
  }
});
