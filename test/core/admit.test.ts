// Decision 4 — admit or reject, never queue (docs/policies.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { decide } from '../../core/decide/decide.ts';
import { createEnv } from '../../core/decide/env.ts';
import { requestFacts } from '../../core/facts/request-facts.ts';
import type { Endpoint } from '../../core/facts/request-schemas.ts';
import { bundledPolicy, chosen, ManualFleet, rejected, route, singlePool } from '../helpers/core.ts';

test('a tenant over its requests-per-minute quota gets 429 with Retry-After', () => {
  const policy = singlePool({
    strategies: ['least-load'],
    tenants: 'kind: tenants\nanonymous: t\ntenants:\n  - { id: t, tier: free, quotas: { requests_per_minute: 3 } }\n',
  });
  let now = 0;
  const env = createEnv({ now: () => now });
  for (let i = 0; i < 3; i++) assert.equal(chosen(route(policy, { model: 'm' }, new ManualFleet(), env)).status, 200);
  const d = route(policy, { model: 'm' }, new ManualFleet(), env);
  assert.equal(chosen(d).status, 429);
  assert.equal(rejected(d).rejection?.code, 'quota_exceeded');
  assert.equal(rejected(d).rejection?.retryAfterS, 20, 'one request refills in 60/3 s');
  now += 20_000;
  assert.equal(chosen(route(policy, { model: 'm' }, new ManualFleet(), env)).status, 200, 'refilled after Retry-After');
});

test('tokens per minute count the prompt and max_tokens', () => {
  const policy = singlePool({
    strategies: ['least-load'],
    tenants: 'kind: tenants\nanonymous: t\ntenants:\n  - { id: t, tier: free, quotas: { tokens_per_minute: 1000 } }\n',
  });
  const env = createEnv({ now: () => 0 });
  assert.equal(chosen(route(policy, { model: 'm', maxTokens: 600 }, new ManualFleet(), env)).status, 200);
  const d = route(policy, { model: 'm', maxTokens: 600 }, new ManualFleet(), env);
  assert.equal(chosen(d).status, 429);
  assert.match(rejected(d).rejection!.message, /1000 tokens per minute/);
});

test('a rejected request takes no quota', () => {
  const policy = singlePool({
    strategies: ['least-load'],
    tenants: 'kind: tenants\nanonymous: t\ntenants:\n  - { id: t, tier: free, quotas: { requests_per_minute: 1 } }\n',
  });
  const env = createEnv({ now: () => 0 });
  const busy = new ManualFleet();
  for (let i = 0; i < 4; i++) busy.set(`r${i}`, { queueDepth: 500 });
  assert.equal(chosen(route(policy, { model: 'm' }, busy, env)).status, 503);
  assert.equal(chosen(route(policy, { model: 'm' }, new ManualFleet(), env)).status, 200);
});

test('every replica at capacity: 503 with Retry-After, nothing queued at the router', () => {
  const policy = singlePool({ strategies: ['power-of-two'], replicas: 3, pool: '    capacity: { queue_depth: 20, retry_after_s: 3 }\n' });
  const fleet = new ManualFleet().set('r0', { queueDepth: 25 }).set('r1', { queueDepth: 20 }).set('r2', { queueDepth: 19 });
  assert.equal(chosen(route(policy, { model: 'm' }, fleet)).status, 200, 'one replica still has room');
  fleet.set('r2', { queueDepth: 40 });
  const d = route(policy, { model: 'm' }, fleet);
  assert.equal(chosen(d).status, 503);
  assert.equal(rejected(d).rejection?.code, 'no_capacity');
  assert.equal(rejected(d).rejection?.retryAfterS, 3);
});

test('an estimated wait past x-deadline-ms is a 503; within it, admitted', () => {
  const policy = singlePool({
    strategies: ['least-load'],
    replicas: 2,
    pool: '    wait_estimate: { ms_per_queued_request: 100, prefill_ms_per_1k_tokens: 20 }\n',
  });
  const fleet = new ManualFleet().set('r0', { queueDepth: 10 }).set('r1', { queueDepth: 8 });
  const late = route(policy, { model: 'm', deadlineMs: 500 }, fleet);
  assert.equal(chosen(late).status, 503);
  assert.equal(rejected(late).rejection?.code, 'deadline_unmeetable');
  assert.ok(rejected(late).rejection!.retryAfterS! >= 1);
  assert.equal(chosen(route(policy, { model: 'm', deadlineMs: 2000 }, fleet)).status, 200);
  assert.equal(chosen(route(policy, { model: 'm' }, fleet)).status, 200, 'no deadline, no check');
});

const malformed = [
  { name: 'no messages', endpoint: 'chat', body: { model: 'chat-small' } },
  { name: 'messages not an array', endpoint: 'chat', body: { model: 'chat-small', messages: 'hi' } },
  { name: 'empty messages', endpoint: 'chat', body: { model: 'chat-small', messages: [] } },
  { name: 'a message without a role', endpoint: 'chat', body: { model: 'chat-small', messages: [{ content: 'x' }] } },
  { name: 'model not a string', endpoint: 'chat', body: { model: 7, messages: [{ role: 'user', content: 'x' }] } },
  { name: 'max_tokens negative', endpoint: 'chat', body: { model: 'chat-small', max_tokens: -1, messages: [{ role: 'user', content: 'x' }] } },
  { name: 'a body that is an array', endpoint: 'chat', body: [1, 2] },
  { name: 'a null body', endpoint: 'completions', body: null },
  { name: 'completions without a prompt', endpoint: 'completions', body: { model: 'chat-small' } },
  { name: 'embeddings with an object input', endpoint: 'embeddings', body: { model: 'chat-small', input: { a: 1 } } },
] as const;

for (const row of malformed) {
  test(`malformed request (${row.name}) is a 400, not an exception`, () => {
    const d = decide(requestFacts({ requestId: 'x', endpoint: row.endpoint, headers: {}, body: row.body }), bundledPolicy(), new ManualFleet(), createEnv());
    assert.equal(chosen(d).status, 400);
    assert.equal(rejected(d).rejection?.type, 'invalid_request_error');
  });
}

test('bad headers are 400s: x-priority and x-deadline-ms', () => {
  assert.equal(chosen(route(bundledPolicy(), { model: 'chat-small', priority: 'urgent' })).status, 400);
  assert.equal(chosen(route(bundledPolicy(), { model: 'chat-small', deadlineMs: -5 })).status, 400);
});

test('property: any JSON body and headers yield a decision with a status, never an exception', () => {
  const policy = bundledPolicy();
  const env = createEnv();
  fc.assert(
    fc.property(
      fc.constantFrom<Endpoint>('chat', 'completions', 'embeddings'),
      fc.oneof(
        fc.jsonValue(),
        fc.record(
          {
            model: fc.oneof(fc.string(), fc.constantFrom('auto', 'chat-large', 'team-x-v3')),
            messages: fc.jsonValue(),
            prompt: fc.jsonValue(),
            max_tokens: fc.jsonValue(),
          },
          { requiredKeys: [] },
        ),
      ),
      fc.dictionary(fc.constantFrom('authorization', 'x-priority', 'x-deadline-ms', 'x-conversation-id'), fc.string()),
      (endpoint, body, headers) => {
        const d = decide(requestFacts({ requestId: 'p', endpoint, headers, body }), policy, new ManualFleet(), env);
        return [200, 400, 401, 403, 404, 429, 503].includes(chosen(d).status) && (chosen(d).status === 200) === d.ok;
      },
    ),
    { numRuns: 2000 },
  );
});
