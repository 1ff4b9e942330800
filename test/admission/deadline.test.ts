// The deadline check counts the pool's base latency (issue: `x-deadline-ms: 1`
// was admitted where first tokens took hundreds of ms). Through the real router
// and emulated engines in real time: once the pool's streams have shown what a
// first token takes, a deadline no engine can meet gets 503
// deadline_unmeetable; a generous one is still admitted. And the policy's
// own base (wait_estimate.base_ms) before anything was observed.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { BaseLatency } from '../../core/fleet/base-latency.ts';
import { json, OPEN_TENANTS, startTestRouter, TEST_KEY, TINY_MODELS, tinyPool, until, type TestRouter } from '../helpers/router.ts';

let t: TestRouter;

before(async () => {
  // speed 1: the emulated engine's steps take real time (5 ms a step on the tiny profile at the least).
  t = await startTestRouter(
    { 'models.yaml': TINY_MODELS, 'pools.yaml': tinyPool({ replicas: 1, strategies: '[least-load]' }), 'tenants.yaml': OPEN_TENANTS },
    { speed: 1 },
  );
  await until(() => t.router.fleet.list().every((s) => s.health === 'ready'), 10_000, 'engine ready');
});

after(() => t.close());

async function ask(deadlineMs: number, stream = false): Promise<Response> {
  return fetch(`${t.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_KEY}`, 'x-deadline-ms': String(deadlineMs) },
    body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, stream }),
  });
}

test('after a few streams, a deadline shorter than the first tokens took is refused; a generous one is admitted', async () => {
  // Nothing observed yet: the policy's estimate alone (a short prompt, no queue) fits 1 ms.
  const blind = await ask(1);
  assert.equal(blind.status, 200, 'no observed base yet');
  await blind.text();
  // Streams through the official client: their first tokens teach the pool's base latency.
  for (let i = 0; i < 4; i++) {
    const stream = await t.client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: `hello ${i}` }], max_tokens: 2, stream: true });
    for await (const chunk of stream) void chunk;
  }
  const refused = await ask(1);
  assert.equal(refused.status, 503);
  assert.equal(refused.headers.get('retry-after'), '1');
  const body = await json(refused);
  assert.equal(body.error.code, 'deadline_unmeetable');
  assert.match(
    body.error.message,
    /expected in about \d+ ms \(\d+ ms of it the base latency the pool's recent first tokens showed\), past the 1 ms deadline in x-deadline-ms/,
  );
  const decision = await json(await fetch(`${t.adminUrl}/admin/decisions/${refused.headers.get('x-request-id')}`));
  assert.equal(decision.trace.admit.decidedBy, 'deadline');
  // At least one engine step (5 ms) and at most what a loaded machine makes of it.
  assert.ok(decision.trace.admit.facts.observedBaseMs >= 4 && decision.trace.admit.facts.observedBaseMs < 5000, JSON.stringify(decision.trace.admit.facts));
  // The openai client hears the same refusal, streaming or not.
  const viaClient = await t.client.chat.completions
    .create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, stream: true }, { headers: { 'x-deadline-ms': '1' } })
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  assert.ok(viaClient instanceof OpenAI.APIError && viaClient.status === 503, String(viaClient));
  // A deadline the pool can meet is admitted, and the trace shows the estimate with the base in it.
  const admitted = await ask(60_000);
  assert.equal(admitted.status, 200);
  await admitted.text();
  const ok = await json(await fetch(`${t.adminUrl}/admin/decisions/${admitted.headers.get('x-request-id')}`));
  assert.ok(ok.trace.admit.facts.observedBaseMs >= 4);
  assert.ok(ok.trace.admit.facts.estimatedWaitMs >= ok.trace.admit.facts.observedBaseMs);
});

test('wait_estimate.base_ms: a pool with a known base refuses an impossible deadline before anything was observed', async () => {
  const own = await startTestRouter({
    'models.yaml': TINY_MODELS,
    'pools.yaml': tinyPool({ replicas: 1, strategies: '[least-load]', extra: '    wait_estimate: { base_ms: 200 }\n' }),
    'tenants.yaml': OPEN_TENANTS,
  });
  try {
    await until(() => own.router.fleet.list().every((s) => s.health === 'ready'), 10_000, 'engine ready');
    const call = (deadline: number) =>
      fetch(`${own.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_KEY}`, 'x-deadline-ms': String(deadline) },
        body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
      });
    const refused = await call(50);
    assert.equal(refused.status, 503);
    assert.match((await json(refused)).error.message, /expected in about 200 ms, past the 50 ms deadline/);
    const admitted = await call(1000);
    assert.equal(admitted.status, 200);
    await admitted.text();
  } finally {
    await own.close();
  }
});

test('the base latency is a low percentile of what first tokens took beyond the estimate, never negative', () => {
  const base = new BaseLatency();
  base.record('p', 100, 10);
  base.record('p', 300, 10);
  assert.equal(base.baseMs('p'), undefined, 'too few streams to say');
  for (let i = 0; i < 20; i++) base.record('p', 210 + i, 10);
  base.record('p', 5, 50); // a first token faster than the estimate: residual 0, not negative
  // Residuals 0, 90, 200…219, 290: the 10th percentile of 23 is the third, so one odd fast answer does not make the base.
  assert.equal(base.baseMs('p'), 200);
  assert.equal(base.baseMs('other'), undefined);
});
