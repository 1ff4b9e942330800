// Decision 1 — which model: aliases, the cascade, tenants, adapters, cold
// models, and the canary sticky by conversation (docs/policies.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { chooseVersion } from '../../core/decide/model.ts';
import { admitted, bundledPolicy, chosen, rejected, route } from '../helpers/core.ts';

const policy = bundledPolicy();

const table = [
  { name: 'alias chat-large resolves to the 70B', req: { model: 'chat-large' }, status: 200, model: 'llama-3-70b-instruct' },
  { name: 'a model id is used as is', req: { model: 'llama-3-8b-instruct' }, status: 200, model: 'llama-3-8b-instruct' },
  {
    name: 'cascade: a short simple query goes to the 8B',
    req: { model: 'auto', content: 'What is the capital of France?' },
    status: 200,
    model: 'llama-3-8b-instruct',
  },
  {
    name: 'cascade: code goes to the coder',
    req: { model: 'auto', content: 'Fix this:\n```js\nconst x = 1;\n```' },
    status: 200,
    model: 'qwen2.5-coder-32b-instruct',
  },
  {
    name: 'cascade: a long question goes to the 70B',
    req: { model: 'auto', content: 'Compare these three economic theories in depth. '.repeat(40) },
    status: 200,
    model: 'llama-3-70b-instruct',
  },
  {
    name: 'cascade: a long answer asked of a short question goes to the 70B',
    req: { model: 'auto', content: 'Write an essay on rivers.', maxTokens: 2000 },
    status: 200,
    model: 'llama-3-70b-instruct',
  },
  { name: 'a restricted tenant gets 403 for another model', req: { model: 'chat-large', key: 'sk-demo-restricted' }, status: 403, code: 'model_not_allowed' },
  {
    name: 'a restricted tenant may use its model',
    req: { model: 'llama-3-8b-instruct', key: 'sk-demo-restricted' },
    status: 200,
    model: 'llama-3-8b-instruct',
  },
  { name: 'an unknown model is a 404', req: { model: 'gpt-7' }, status: 404, code: 'model_not_found' },
  { name: 'an unknown API key is a 401', req: { model: 'chat-small', key: 'sk-wrong' }, status: 401, code: 'invalid_api_key' },
  { name: "another tenant's adapter is a 403", req: { model: 'team-x-v3', key: 'sk-demo-free' }, status: 403, code: 'adapter_not_allowed' },
  { name: 'a tenant names its adapter', req: { model: 'team-x-v3', key: 'sk-demo-lora' }, status: 200, model: 'llama-3-8b-instruct', adapter: 'team-x-v3' },
  {
    name: "a tenant's default adapter applies to the base model",
    req: { model: 'chat-small', key: 'sk-demo-lora' },
    status: 200,
    model: 'llama-3-8b-instruct',
    adapter: 'team-x-v3',
  },
];

for (const row of table) {
  test(row.name, () => {
    const d = route(policy, row.req);
    assert.equal(chosen(d).status, row.status, chosen(d).reason);
    if (row.model) assert.equal(chosen(d).model, row.model);
    if (row.code) assert.equal(rejected(d).rejection.code, row.code);
    if ('adapter' in row) {
      assert.equal(chosen(d).adapter, row.adapter);
      assert.equal(admitted(d).value.upstreamModel, row.adapter, 'LoRA requests name the adapter upstream (vLLM convention)');
    }
  });
}

test('a cold-tier model gets 503 with a long Retry-After and a trigger-load action', () => {
  const d = route(policy, { model: 'llama-3.1-405b-instruct' });
  assert.equal(chosen(d).status, 503);
  assert.equal(rejected(d).rejection?.code, 'model_cold');
  assert.equal(rejected(d).rejection?.retryAfterS, 300);
  assert.deepEqual(rejected(d).known.action, {
    type: 'trigger_load',
    model: 'llama-3.1-405b-instruct',
    url: 'http://127.0.0.1:8090/load/llama-3.1-405b-instruct',
  });
});

test('the cascade skips a model the tenant may not use', () => {
  // The restricted tenant may only use the 8B: code would go to the coder, the
  // default to the 70B; a short question still reaches the 8B.
  assert.equal(chosen(route(policy, { model: 'auto', key: 'sk-demo-restricted', content: 'Hi!' })).model, 'llama-3-8b-instruct');
  const shortCode = route(policy, { model: 'auto', key: 'sk-demo-restricted', content: '```py\nprint(1)\n```' });
  assert.equal(chosen(shortCode).model, 'llama-3-8b-instruct');
  assert.match(JSON.stringify(shortCode.trace.model), /may not use qwen2.5-coder-32b-instruct/);
  // Long code: neither the coder nor the default 70B is allowed, and the
  // client never asked for either: the cascade's first allowed model answers.
  const longCode = route(policy, { model: 'auto', key: 'sk-demo-restricted', content: '```py\n' + 'print(1)\n'.repeat(200) + '```' });
  assert.equal(chosen(longCode).status, 200);
  assert.equal(chosen(longCode).model, 'llama-3-8b-instruct');
  assert.match(longCode.trace.model!.decidedBy, /cascade auto: first allowed model/);
  assert.match(longCode.trace.model!.reason, /default llama-3-70b-instruct is not allowed for restricted → llama-3-8b-instruct/);
});

test('the canary takes 5% ± 1% of 10,000 conversations, each always on the same version', () => {
  const model = policy.models.get('llama-3-70b-instruct')!;
  const never = () => {
    throw new Error('a conversation must not need randomness');
  };
  let canary = 0;
  for (let i = 0; i < 10_000; i++) {
    const conversationId = `conversation-${i}`;
    const version = chooseVersion(model, { conversationId }, { random: never });
    if (version.canary) canary++;
    for (let repeat = 0; repeat < 3; repeat++) assert.equal(chooseVersion(model, { conversationId }, { random: never }).version, version.version);
  }
  assert.ok(canary >= 400 && canary <= 600, `canary share ${canary / 100}%`);
});

test('property: any conversation id stays on one version across requests and routers', () => {
  const other = bundledPolicy(99); // another router instance, another seed
  fc.assert(
    fc.property(
      fc.string({ minLength: 1, maxLength: 40 }).filter((s) => s.trim() === s && !/[\r\n]/.test(s)),
      (conversation) => {
        const a = route(policy, { model: 'chat-large', conversation });
        const b = route(other, { model: 'chat-large', conversation, content: 'a later turn' });
        return chosen(a).version === chosen(b).version;
      },
    ),
    { numRuns: 300 },
  );
});
