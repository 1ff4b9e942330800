// The decision log keeps an entry's fields in columns and rebuilds it when
// read (core/observe/decision-log.ts): what /admin/decisions shows must be
// decisionJson's explanation of the very decision, field for field and in
// its order, with when it was decided first and what the request was last.
// Real decisions of a real router: admitted, rejected by decide(), and
// refused before decide() ran.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import diagnostics_channel from 'node:diagnostics_channel';
import { decisionJson } from '../../core/decide/decision.ts';
import { REQUEST_CHANNELS, type RequestDecided } from '../../core/serve/request-lifecycle.ts';
import { buildInjectRouter } from '../helpers/inject.ts';
import { OPEN_TENANTS, TINY_MODELS } from '../helpers/router.ts';

test('every entry of /admin/decisions is its decision as decisionJson explains it, in the same order, after its time and before its request', async () => {
  const pools = `kind: pools\npools:\n  - name: general\n    model: tiny\n    version: v1\n    limits: { max_model_len: 1024 }\n    strategies: [round-robin]\n    replicas:\n      - { id: r0, url: "emulate://tiny" }\n      - { id: r1, url: "emulate://tiny" }\n`;
  const t = await buildInjectRouter(
    { 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': pools },
    { scrapeIntervalMs: 3_600_000, healthIntervalMs: 3_600_000 },
  );
  const decided: RequestDecided[] = [];
  const listener = (message: unknown) => void decided.push(message as RequestDecided);
  diagnostics_channel.subscribe(REQUEST_CHANNELS.decided, listener);
  try {
    const chat = { model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 };
    assert.equal((await t.post('/v1/chat/completions', chat, { 'x-conversation-id': 'conv-1' })).statusCode, 200);
    assert.equal((await t.post('/v1/chat/completions', { ...chat, stream: true })).statusCode, 200);
    assert.equal((await t.post('/v1/chat/completions', { ...chat, model: 'no-such-model' })).statusCode, 404);
    assert.equal((await t.post('/v1/chat/completions', { ...chat, max_tokens: 5000 })).statusCode, 400);
    // Refused by the body check before decide(): kept with no request columns.
    const malformed = await t.post('/v1/chat/completions', '{"model":');
    assert.equal(malformed.statusCode, 400);

    const entries = t.router.decisions.recent(100).reverse();
    assert.equal(entries.length, decided.length + 1, 'one entry for each decision, and one for the refusal');
    for (const [i, { decision, facts }] of decided.entries()) {
      const entry = entries[i];
      assert.match(String(entry.at), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      const expected = {
        at: entry.at,
        ...decisionJson(decision),
        ...(facts ? { endpoint: facts.endpoint, stream: facts.stream, conversationId: facts.conversationId ?? null } : {}),
      };
      assert.equal(JSON.stringify(entry), JSON.stringify(expected), `entry ${i}`);
    }
    assert.ok(decided.some((d) => d.decision.ok) && decided.some((d) => !d.decision.ok), 'admitted and rejected decisions were among them');
    const refusal = entries.at(-1)!;
    assert.equal(refusal.requestId, malformed.headers['x-request-id']);
    assert.deepEqual(Object.keys(refusal), [
      'at',
      'requestId',
      'status',
      'tenant',
      'model',
      'version',
      'adapter',
      'canary',
      'pool',
      'priority',
      'replica',
      'reason',
      'error',
      'trace',
    ]);
    assert.deepEqual(refusal.trace, { admit: { decidedBy: 'request check', reason: (refusal.error as { message: string }).message } });
  } finally {
    diagnostics_channel.unsubscribe(REQUEST_CHANNELS.decided, listener);
    await t.close();
  }
});
