// A cascade never routes a tenant into a 403 for a model it did not ask for:
// when the cascade's default is not allowed, the first model of the cascade
// the tenant may use answers; a tenant that may use none of them is not
// offered the alias at all. And a rule on what the prompt says routes
// through the real router.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import OpenAI from 'openai';
import { startTestRouter } from '../helpers/router.ts';

const sha = (key: string) => createHash('sha256').update(key).digest('hex');
const models =
  'kind: models\nmodels:\n  - id: small\n    versions: [{ version: v1 }]\n  - id: big\n    versions: [{ version: v1 }]\n  - id: other\n    versions: [{ version: v1 }]\naliases:\n  - { name: auto, cascade: auto }\n';
const tenants = `kind: tenants\ntenants:\n  - { id: open, tier: free, api_key_sha256: [${sha('sk-open')}] }\n  - { id: small-only, tier: free, api_key_sha256: [${sha('sk-small')}], allowed_models: [small] }\n  - { id: other-only, tier: free, api_key_sha256: [${sha('sk-other')}], allowed_models: [other] }\n`;
const pool = (model: string, id: string) =>
  `  - name: general\n    model: ${model}\n    version: v1\n    limits: { max_model_len: 100000 }\n    replicas: [{ id: ${id}, url: "emulate://tiny" }]\n`;
const pools = `kind: pools\npools:\n${pool('small', 's0')}${pool('big', 'b0')}${pool('other', 'o0')}`;
const rules = [
  'kind: rules',
  'cascades:',
  '  - name: auto',
  '    default_model: big',
  '    rules:',
  '      - name: SQL questions go to other',
  '        priority: 30',
  '        conditions: { all: [{ fact: prompt, operator: containsAny, value: [sql, "inner join"] }] }',
  '        event: { type: route-model, params: { model: other } }',
  '      - name: short goes small',
  '        priority: 20',
  '        conditions: { all: [{ fact: promptTokens, operator: lessThan, value: 50 }] }',
  '        event: { type: route-model, params: { model: small } }',
  '',
].join('\n');

test('cascades respect tenant restrictions; prompt keywords route; /v1/models offers only what a tenant can use', { timeout: 60_000 }, async (t) => {
  const router = await startTestRouter({ 'models.yaml': models, 'tenants.yaml': tenants, 'pools.yaml': pools, 'rules.yaml': rules });
  t.after(() => router.close());
  const client = (key: string) => new OpenAI({ baseURL: `${router.url}/v1`, apiKey: key, maxRetries: 0, timeout: 20_000 });
  const long = 'tell me a long story about the sea '.repeat(20);
  const ask = async (key: string, content: string) => {
    const { data, response } = await client(key)
      .chat.completions.create({ model: 'auto', messages: [{ role: 'user', content }], max_tokens: 4 })
      .withResponse();
    return { model: data.model, rule: response.headers.get('x-switchyard-model-rule'), poolRule: response.headers.get('x-switchyard-pool-rule') };
  };

  // An open tenant: the keyword rule, the short rule, and the default.
  const sql = await ask('sk-open', 'How do I write an INNER JOIN in SQL?');
  assert.equal(sql.model, 'other');
  // The headers name the rules that fired (decision headers are full in this policy).
  assert.equal(sql.rule, 'cascade auto: rule "SQL questions go to other"');
  assert.equal(sql.poolRule, 'default pool');
  assert.equal((await ask('sk-open', 'hi')).model, 'small');
  assert.equal((await ask('sk-open', long)).model, 'big');

  // May use only small: a long request falls back to small, not a 403 for big.
  assert.equal((await ask('sk-small', long)).model, 'small');
  // The keyword rule names a model it may not use: skipped, and the fallback answers.
  assert.equal((await ask('sk-small', `${long} sql`)).model, 'small');

  // May use only other: the default and the short rule are not allowed; other is the cascade's first allowed model.
  assert.equal((await ask('sk-other', 'hi')).model, 'other');

  // /v1/models: the alias is offered to a tenant that can use one of its models.
  const listed = async (key: string) => (await client(key).models.list()).data.map((m) => m.id).sort();
  assert.deepEqual(await listed('sk-small'), ['auto', 'small']);
  assert.deepEqual(await listed('sk-open'), ['auto', 'big', 'other', 'small']);
});

test("a tenant that may use none of a cascade's models is not offered its alias, and asking for it is a 403 naming the alias", {
  timeout: 60_000,
}, async (t) => {
  const lonely = `kind: tenants\ntenants:\n  - { id: lonely, tier: free, api_key_sha256: [${sha('sk-lonely')}], allowed_models: [solo] }\n`;
  const withSolo = `${models.replace('aliases:', '  - id: solo\n    versions: [{ version: v1 }]\naliases:')}`;
  const router = await startTestRouter(
    { 'models.yaml': withSolo, 'tenants.yaml': lonely, 'pools.yaml': `${pools}${pool('solo', 'x0')}`, 'rules.yaml': rules },
    { apiKey: 'sk-lonely' },
  );
  t.after(() => router.close());
  assert.deepEqual(
    (await router.client.models.list()).data.map((m) => m.id),
    ['solo'],
  );
  const error = await router.client.chat.completions
    .create({ model: 'auto', messages: [{ role: 'user', content: 'hi' }] })
    .catch((e: unknown) => e as { status: number; message: string; code: string });
  assert.equal((error as { status: number }).status, 403);
  assert.match((error as { message: string }).message, /may use none of the models of `auto`/);
});
