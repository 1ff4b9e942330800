// Refusals as a client sees them, through inject(): status, the OpenAI error
// body, Retry-After / x-should-retry, x-request-id and the reject reason, and
// the x-ratelimit-* headers of a quota'd tenant (docs/serving.md).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { APIError } from 'openai';
import { buildInjectRouter, errorOf, type InjectRouter } from '../../helpers/inject.ts';
import { OPEN_TENANTS, TINY_MODELS, tinyPool } from '../../helpers/router.ts';

const chat = (extra: Record<string, unknown> = {}) => ({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 1, ...extra });
let t: InjectRouter;

before(async () => {
  const tenants = OPEN_TENANTS.replace('tier: free,', 'tier: free, quotas: { requests_per_minute: 3 },');
  const models = `${TINY_MODELS}  - id: giant\n    cold: { load_hook: "http://127.0.0.1:9/load", retry_after_s: 300 }\n  - id: warmish\n    cold: { load_hook: "http://127.0.0.1:9/load", retry_after_s: 20 }\n`;
  t = await buildInjectRouter({
    'models.yaml': models,
    'tenants.yaml': tenants,
    'pools.yaml': tinyPool({ replicas: 1 }),
    'settings.yaml': 'kind: settings\ndecision_headers: full\nbody_limit_bytes: 4096\n',
  });
});
after(() => t.close());

test('400s: a syntax error, a wrong type (param named), a bad x-priority; OpenAI-shaped, with a request id', async () => {
  assert.equal(t.router.app.server.listening, false, 'no port: every request here went through inject()');
  const syntax = await t.post('/v1/chat/completions', '{"model": "tiny", "messages": [');
  assert.equal(syntax.statusCode, 400);
  assert.equal(errorOf(syntax).code, 'invalid_request');
  assert.ok(syntax.headers['x-request-id'], 'a refusal carries the request id to quote');
  const wrongType = await t.post('/v1/chat/completions', { model: 'tiny', messages: 'hello' });
  assert.equal(wrongType.statusCode, 400);
  assert.equal(errorOf(wrongType).param, 'messages');
  assert.equal(wrongType.headers['x-switchyard-reject-reason'], 'invalid_request');
  const priority = await t.post('/v1/chat/completions', chat(), { 'x-priority': 'urgent!!' });
  assert.equal(priority.statusCode, 400);
  assert.match(errorOf(priority).message, /x-priority/);
});

test('413 names the limit and what to do; 404 an unknown model or route; 401 an unknown key', async () => {
  const large = await t.post('/v1/chat/completions', chat({ messages: [{ role: 'user', content: 'x'.repeat(10_000) }] }));
  assert.equal(large.statusCode, 413);
  const error = errorOf(large);
  assert.equal(error.code, 'payload_too_large');
  assert.match(error.message, /4096 bytes, settings body_limit_bytes/);
  const model = await t.post('/v1/chat/completions', chat({ model: 'nope' }));
  assert.equal(model.statusCode, 404);
  assert.equal(errorOf(model).code, 'model_not_found');
  const route = await t.router.app.inject({ method: 'GET', url: '/v1/nothing' });
  assert.equal(route.statusCode, 404);
  assert.equal(errorOf(route).code, 'route_not_found');
  const key = await t.post('/v1/chat/completions', chat(), { authorization: 'Bearer sk-wrong' });
  assert.equal(key.statusCode, 401);
  assert.equal(errorOf(key).code, 'invalid_api_key');
});

test('503 for a cold model: a long wait says x-should-retry: false, a short one leaves retrying to the client', async () => {
  const long = await t.post('/v1/chat/completions', chat({ model: 'giant' }));
  assert.equal(long.statusCode, 503);
  assert.equal(errorOf(long).code, 'model_cold');
  assert.equal(long.headers['retry-after'], '300');
  assert.equal(long.headers['x-should-retry'], 'false');
  const short = await t.post('/v1/chat/completions', chat({ model: 'warmish' }));
  assert.equal(short.statusCode, 503);
  assert.equal(short.headers['retry-after'], '20');
  assert.equal(short.headers['x-should-retry'], undefined);
  // The official client reads the same answer as a typed error, and does not retry the long wait.
  await assert.rejects(t.client.chat.completions.create(chat({ model: 'giant' }) as never), (e: unknown) => {
    assert.ok(e instanceof APIError);
    assert.equal(e.status, 503);
    assert.equal(e.headers?.get('retry-after'), '300');
    return true;
  });
});

test('429 past the quota, with Retry-After and the x-ratelimit-* headers counting down to it', async () => {
  const first = await t.post('/v1/chat/completions', chat());
  assert.equal(first.statusCode, 200, first.body);
  assert.equal(first.headers['x-ratelimit-limit-requests'], '3');
  const remaining = Number(first.headers['x-ratelimit-remaining-requests']);
  for (let left = remaining; left > 0; left--) assert.equal((await t.post('/v1/chat/completions', chat())).statusCode, 200);
  const limited = await t.post('/v1/chat/completions', chat());
  assert.equal(limited.statusCode, 429);
  assert.equal(errorOf(limited).code, 'quota_exceeded');
  assert.match(String(limited.headers['retry-after']), /^\d+$/);
  assert.equal(limited.headers['x-ratelimit-remaining-requests'], '0');
  await assert.rejects(t.client.chat.completions.create(chat() as never), (e: unknown) => e instanceof APIError && e.status === 429);
});
