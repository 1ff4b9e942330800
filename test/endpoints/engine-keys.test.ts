// api_key_env: engines started with a required key (vLLM's --api-key) behind
// the router. The router sends the key its policy names, never the client's
// own, shows it nowhere, and reads it again when the policy is reloaded.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { PolicyStore } from '../../core/decide/store.ts';
import { startEmulator, type Emulator } from '../../sim/emulator/server.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';
import { FULL_HEADERS_SETTINGS, json, OPEN_TENANTS, startTestRouter, TEST_KEY, TINY_MODELS, type TestRouter } from '../helpers/router.ts';

const ENGINE_KEY = 'engine-key-0f9e8d7c6b5a';
let engine: Emulator;

before(async () => {
  process.env.SY_TEST_ENGINE_KEY = ENGINE_KEY;
  process.env.SY_TEST_WRONG_KEY = 'not-the-engine-key-123';
  engine = await startEmulator({ profile: 'tiny', speed: 20, host: '127.0.0.1', servedModelName: 'tiny', apiKey: ENGINE_KEY });
});
after(async () => {
  await engine.close();
  delete process.env.SY_TEST_ENGINE_KEY;
  delete process.env.SY_TEST_WRONG_KEY;
});

const pools = (keyLine: string) =>
  `kind: pools\npools:\n  - name: general\n    model: tiny\n    version: v1\n${keyLine}    replicas:\n      - { id: keyed, url: "${engine.url}" }\n`;

async function routerOn(dir: string): Promise<{ t: TestRouter; store: PolicyStore }> {
  const store = await PolicyStore.open({ dir, builtins: BUILTIN_STRATEGIES, seed: 1 });
  return { t: await startTestRouter({}, { policy: store }), store };
}

function policyDir(keyLine: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'sy-engine-keys-'));
  const files = { 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'settings.yaml': FULL_HEADERS_SETTINGS, 'pools.yaml': pools(keyLine) };
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

test('the emulated engine refuses /v1 requests without its key, as vLLM does, and leaves /health and /metrics open', async () => {
  const refused = await fetch(`${engine.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"model":"tiny","messages":[{"role":"user","content":"hi"}]}',
  });
  assert.equal(refused.status, 401);
  assert.deepEqual(await refused.json(), { error: 'Unauthorized' });
  assert.equal((await fetch(`${engine.url}/health`)).status, 200);
  assert.equal((await fetch(`${engine.url}/metrics`)).status, 200);
});

test("with api_key_env the router sends the engine its key (not the client's) and prints it nowhere", async () => {
  const { t, store } = await routerOn(policyDir('    api_key_env: SY_TEST_ENGINE_KEY\n'));
  try {
    const chat = await t.client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 });
    assert.equal(chat.usage?.completion_tokens, 4);
    const stream = await t.client.responses.create({ model: 'tiny', input: 'hi', max_output_tokens: 3, stream: true });
    for await (const _event of stream);
    const state = JSON.stringify(await json(await fetch(`${t.adminUrl}/admin/state`)));
    const decisions = JSON.stringify(await json(await fetch(`${t.adminUrl}/admin/decisions?limit=10`)));
    const metrics = await (await fetch(`${t.adminUrl}/metrics`)).text();
    for (const page of [state, decisions, metrics]) assert.ok(!page.includes(ENGINE_KEY), 'the engine key is shown nowhere');
    assert.match(state, /"health":"ready"/);
  } finally {
    await t.close();
    await store.close();
  }
});

test("without the key the engine's 401 reaches the client; a reload that names the right variable reads it and requests pass", async () => {
  const dir = policyDir('    api_key_env: SY_TEST_WRONG_KEY\n');
  const { t, store } = await routerOn(dir);
  try {
    const error = await t.client.chat.completions
      .create({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: 2 })
      .catch((e: unknown) => e);
    assert.ok(error instanceof OpenAI.AuthenticationError, String(error));
    writeFileSync(join(dir, 'pools.yaml'), pools('    api_key_env: SY_TEST_ENGINE_KEY\n'));
    const reload = await json(await fetch(`${t.adminUrl}/admin/reload`, { method: 'POST', headers: { 'x-switchyard-admin': '1' } }));
    assert.equal(reload.result, 'live');
    const chat = await t.client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: 2 });
    assert.equal(chat.usage?.completion_tokens, 2);
  } finally {
    await t.close();
    await store.close();
  }
});

test("the client's own key is never forwarded: an engine whose key is the client's still refuses requests without api_key_env", async () => {
  const twin = await startEmulator({ profile: 'tiny', speed: 20, host: '127.0.0.1', servedModelName: 'tiny', apiKey: TEST_KEY });
  const t = await startTestRouter({ 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': pools('').replace(engine.url, twin.url) });
  try {
    const error = await t.client.chat.completions
      .create({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: 2 })
      .catch((e: unknown) => e);
    assert.ok(error instanceof OpenAI.AuthenticationError, String(error));
  } finally {
    await t.close();
    await twin.close();
  }
});

test('a policy naming an unset variable is refused with what to do', async () => {
  const dir = policyDir('    api_key_env: SY_TEST_NOT_SET\n');
  const error = await PolicyStore.open({ dir, builtins: BUILTIN_STRATEGIES, seed: 1 }).then(
    (store) => store.close().then(() => undefined),
    (e: unknown) => e,
  );
  assert.match(String(error), /api_key_env SY_TEST_NOT_SET is not set in the router's environment: set it to the engine's key/);
});
