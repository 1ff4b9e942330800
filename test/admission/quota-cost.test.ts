// The admission estimate counts what the engine may generate, as vLLM reads
// the request: the quota bypasses of n / best_of, a missing max_tokens, a
// small max_completion_tokens beside a large max_tokens, and embeddings
// charged for generating are gone. And usage is checked before it is trusted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { requestFacts, type RequestFacts } from '../../core/facts/request-facts.ts';
import { admissionCost, readUsage, UNIT_WEIGHTS, usageCost } from '../../core/quota/cost.ts';
import { MemoryQuotaStore } from '../../core/decide/quota.ts';

function facts(endpoint: 'chat' | 'completions' | 'embeddings', body: Record<string, unknown>): RequestFacts {
  const base =
    endpoint === 'chat'
      ? { messages: [{ role: 'user', content: 'x'.repeat(400) }] }
      : endpoint === 'completions'
        ? { prompt: 'x'.repeat(400) }
        : { input: 'x'.repeat(400) };
  const f = requestFacts({ requestId: 'r', endpoint, headers: {}, body: { model: 'm', ...base, ...body } });
  assert.ok(!('code' in f));
  return f;
}
const cost = (f: RequestFacts, context?: number) => admissionCost(f, UNIT_WEIGHTS, context, 256);

test('every choice may generate: n and best_of multiply the generation', () => {
  const one = cost(facts('chat', { max_tokens: 100 }));
  const many = cost(facts('chat', { max_tokens: 100, n: 64 }));
  const best = cost(facts('completions', { max_tokens: 100, n: 2, best_of: 16 }));
  assert.equal(one.completionTokens, 100);
  assert.equal(many.completionTokens, 6400);
  assert.equal(best.completionTokens, 1600);
});

test('without max_tokens the context left after the prompt counts, not default_max_tokens', () => {
  const c = cost(facts('chat', { ignore_eos: true }), 8192);
  assert.equal(c.completionTokens, 8192 - c.promptTokens);
  assert.equal(c.bounded, true);
  const unknown = cost(facts('chat', {}), undefined);
  assert.equal(unknown.completionTokens, 256, 'no pool limit: default_max_tokens stands in');
  assert.equal(unknown.bounded, false);
});

test('the larger of max_tokens and max_completion_tokens counts, on either endpoint', () => {
  assert.equal(cost(facts('completions', { max_tokens: 50000, max_completion_tokens: 1 })).completionTokens, 50000);
  assert.equal(cost(facts('chat', { max_tokens: 10, max_completion_tokens: 300 })).completionTokens, 300);
});

test('embeddings generate nothing', () => {
  const c = cost(facts('embeddings', {}), 8192);
  assert.equal(c.completionTokens, 0);
  assert.equal(c.tokens, c.promptTokens);
});

test('weights: cached prompt tokens and completion tokens cost what the tenant policy says', () => {
  const weights = { prompt: 1, cachedPrompt: 0.1, completion: 4 };
  const c = admissionCost(facts('chat', { max_tokens: 10 }), weights, undefined, 256);
  assert.equal(c.tokens, c.promptTokens + 40);
  const usage = readUsage(
    { prompt_tokens: 100, completion_tokens: 5, total_tokens: 105, prompt_tokens_details: { cached_tokens: 80 } },
    { ...c, promptTokens: 100 },
    true,
  );
  assert.ok(typeof usage === 'object');
  assert.equal(usageCost(usage, weights), 20 + 8 + 20);
});

test('usage that cannot be trusted is named, never used', () => {
  const c = cost(facts('chat', { max_tokens: 100 }), 8192);
  assert.equal(readUsage(undefined, c, true), 'missing');
  assert.equal(readUsage('lots', c, true), 'invalid');
  assert.equal(readUsage({ prompt_tokens: -1, completion_tokens: 3 }, c, true), 'invalid');
  assert.equal(readUsage({ prompt_tokens: 1.5, completion_tokens: 3 }, c, true), 'invalid');
  assert.equal(readUsage({ prompt_tokens: 10, completion_tokens: 3, prompt_tokens_details: { cached_tokens: 11 } }, c, true), 'invalid');
  assert.equal(readUsage({ prompt_tokens: 10, completion_tokens: 101 }, c, true), 'absurd', 'more than max_tokens allowed');
  assert.equal(readUsage({ prompt_tokens: 1e9, completion_tokens: 3 }, c, true), 'absurd');
  assert.deepEqual(readUsage({ prompt_tokens: 10, completion_tokens: 3, prompt_tokens_details: null }, c, true), {
    promptTokens: 10,
    cachedTokens: 0,
    completionTokens: 3,
  });
});

test('a settled bucket never goes below empty nor above full', () => {
  const store = new MemoryQuotaStore();
  const limits = { tokensPerMinute: 1000 };
  store.take('t', { requests: 1, tokens: 900 }, limits, 0);
  store.settle('t', 5000, limits, 0);
  assert.ok(store.check('t', { requests: 1, tokens: 1000 }, limits, 0).ok, 'a refund fills up to the limit, no more');
  store.take('t', { requests: 1, tokens: 1000 }, limits, 0);
  assert.ok(store.check('t', { requests: 1, tokens: 1 }, limits, 0).ok === false);
  store.settle('t', 1000, limits, 0);
  store.settle('t', -50_000, limits, 0);
  store.settle('t', NaN, limits, 0);
  store.settle('t', 10, limits, 0);
  const verdict = store.check('t', { requests: 1, tokens: 11 }, limits, 0);
  assert.ok(!verdict.ok, 'a charge empties the bucket, never below: 10 refunded after it leaves 10');
  assert.ok(store.check('t', { requests: 1, tokens: 10 }, limits, 0).ok);
});
