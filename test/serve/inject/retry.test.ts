// The retry loop through inject(): an attempt that cannot connect is retried
// on another replica before any byte reached the client, counted once per
// cause; with nothing left to try the client gets a 503 with Retry-After.
// The dead replica is a loopback port nothing listens on (a refused connect).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
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
const chat = { model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 };
// Health checks once an hour: only the proxy's own attempts find the dead replica.
const slowChecks = { scrapeIntervalMs: 3_600_000, healthIntervalMs: 3_600_000 };

async function metricsText(t: Awaited<ReturnType<typeof buildInjectRouter>>): Promise<string> {
  return (await t.admin({ method: 'GET', url: '/metrics' })).body;
}

test('a refused connect is retried on another replica: every request answered by r1, the retries counted by cause', async () => {
  const t = await buildInjectRouter(files([await deadUrl(), 'emulate://tiny']), slowChecks);
  try {
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await t.post('/v1/chat/completions', chat));
    for (const answer of answers) {
      assert.equal(answer.statusCode, 200, answer.body);
      assert.equal(answer.headers['x-switchyard-replica'], 'r1');
      assert.equal(answer.json().usage.completion_tokens, 2);
    }
    const retried = answers.filter((a) => a.headers['x-switchyard-retried'] === 'true').length;
    assert.ok(retried >= 1, 'round-robin sent at least one first attempt to the dead r0');
    const counted = /switchyard_retries_total\{pool="tiny@v1\/general",cause="connect"\} (\d+)/.exec(await metricsText(t));
    assert.equal(Number(counted?.[1]), retried, 'one retry counted per retried request');
    // The connect errors told the fleet: r0 stops being a candidate.
    assert.equal(t.router.fleet.replica('r0')?.health, 'failing');
  } finally {
    await t.close();
  }
});

test('nothing left to try: 503 in OpenAI shape with Retry-After, the replicas named nowhere, and the router still answers', async () => {
  const t = await buildInjectRouter(files([await deadUrl(), await deadUrl()]), slowChecks);
  try {
    const answer = await t.post('/v1/chat/completions', chat);
    assert.equal(answer.statusCode, 503);
    const error = errorOf(answer);
    assert.match(String(answer.headers['retry-after']), /^\d+$/);
    assert.doesNotMatch(error.message, /127\.0\.0\.1/, 'no replica address reaches the client');
    const again = await t.post('/v1/chat/completions', chat);
    assert.equal(again.statusCode, 503, 'the router degrades, it does not die');
    const ready = await t.router.app.inject({ method: 'GET', url: '/healthz' });
    assert.equal(ready.statusCode, 200);
  } finally {
    await t.close();
  }
});
