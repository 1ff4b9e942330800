// Decision 2 — the bundled policy's routing rules (docs/policies.md), in order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bundledPolicy, chosen, promptOf, rejected, route } from '../helpers/core.ts';

const policy = bundledPolicy();

const cases = [
  { name: 'a 128k request does not land in the general pool', req: { model: 'chat-small', content: promptOf(128_000) }, pool: 'long-context' },
  {
    name: 'a prompt over 16000 tokens goes to long-context even for a premium tenant',
    req: { model: 'chat-large', key: 'sk-demo-premium', content: promptOf(20_000) },
    pool: 'long-context',
  },
  { name: 'a premium tenant goes to the premium pool', req: { model: 'chat-large', key: 'sk-demo-premium' }, pool: 'premium' },
  { name: 'x-priority: batch goes to the batch pool', req: { model: 'chat-small', priority: 'batch' }, pool: 'batch' },
  { name: "a batch tenant's default priority goes to the batch pool", req: { model: 'chat-small', key: 'sk-demo-batch' }, pool: 'batch' },
  { name: 'a batch tenant can ask for interactive', req: { model: 'chat-small', key: 'sk-demo-batch', priority: 'interactive' }, pool: 'general' },
  { name: 'everything else goes to the general pool', req: { model: 'chat-small', key: 'sk-demo-free' }, pool: 'general' },
  { name: 'a 16000-token prompt is not yet long-context', req: { model: 'chat-small', content: promptOf(15_900), maxTokens: 100 }, pool: 'general' },
];

for (const c of cases) {
  test(c.name, () => {
    const d = route(policy, c.req);
    assert.equal(chosen(d).status, 200, chosen(d).reason);
    assert.equal(chosen(d).pool, c.pool);
  });
}

test('a canary conversation goes to the canary pool; a rule whose pool the version lacks is skipped', () => {
  let canaryConversation: string | undefined;
  for (let i = 0; i < 1000 && !canaryConversation; i++) {
    const d = route(policy, { model: 'chat-large', conversation: `conv-${i}` });
    if (chosen(d).version === 'v1.6.0') canaryConversation = `conv-${i}`;
  }
  assert.ok(canaryConversation, 'some conversation lands on the canary');
  const d = route(policy, { model: 'chat-large', conversation: canaryConversation });
  assert.equal(chosen(d).pool, 'canary');
  // Premium matches first, but v1.6.0 has no premium pool: the canary rule decides.
  const premium = route(policy, { model: 'chat-large', conversation: canaryConversation, key: 'sk-demo-premium' });
  assert.equal(chosen(premium).pool, 'canary');
  assert.match(JSON.stringify(premium.trace.pool), /has no premium pool/);
});

test('a prompt longer than every pool allows is a 400, not an exception', () => {
  const d = route(policy, { model: 'chat-small', content: promptOf(140_000) });
  assert.equal(chosen(d).status, 400);
  assert.equal(rejected(d).rejection?.code, 'context_length_exceeded');
});

test('a request too long for its pool moves to a roomier pool of the same version', () => {
  // 15,000 prompt + 4,000 max_tokens: the general pool's 16384 can't hold it.
  const d = route(policy, { model: 'chat-small', content: promptOf(15_000), maxTokens: 4000 });
  assert.equal(chosen(d).status, 200);
  assert.equal(chosen(d).pool, 'long-context');
});
