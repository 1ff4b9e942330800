// What clients need to behave well (docs/serving.md "What clients are told"):
// x-ratelimit-* headers, x-should-retry beside a long Retry-After, the engine's
// own Retry-After, OpenAI's wording of a context overflow, vLLM's /v1/models.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI, { APIError, BadRequestError } from 'openai';
import { OPEN_TENANTS, startTestRouter, TEST_KEY, TINY_MODELS, tinyPool, json } from '../helpers/router.ts';

const files = (pool: string, extra: Record<string, string> = {}) => ({
  'models.yaml': TINY_MODELS,
  'tenants.yaml': OPEN_TENANTS,
  'pools.yaml': pool,
  ...extra,
});
const chat = (url: string, body: unknown) =>
  fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_KEY}` },
    body: JSON.stringify(body),
  });

test('a cold model: 503 with x-should-retry: false, and the openai client does not retry it', async () => {
  const hook = createServer((req, res) => {
    req.resume();
    res.end('{}');
  });
  await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve));
  const models = `${TINY_MODELS}  - id: giant\n    cold: { load_hook: "http://127.0.0.1:${(hook.address() as AddressInfo).port}/load", retry_after_s: 300 }\n  - id: warmish\n    cold: { load_hook: "http://127.0.0.1:${(hook.address() as AddressInfo).port}/load2", retry_after_s: 20 }\n`;
  const t = await startTestRouter(files(tinyPool({ replicas: 1 }), { 'models.yaml': models }));
  try {
    let requests = 0;
    const counting = new OpenAI({
      baseURL: `${t.url}/v1`,
      apiKey: TEST_KEY,
      maxRetries: 3,
      fetch: (input, init) => {
        requests++;
        return fetch(input, init);
      },
    });
    const started = Date.now();
    await assert.rejects(counting.chat.completions.create({ model: 'giant', messages: [{ role: 'user', content: 'x' }] }), (e: unknown) => {
      assert.ok(e instanceof APIError);
      assert.equal(e.status, 503);
      assert.equal(e.headers?.get('retry-after'), '300');
      assert.equal(e.headers?.get('x-should-retry'), 'false');
      return true;
    });
    assert.equal(requests, 1, 'the client stopped at the first 503');
    assert.ok(Date.now() - started < 5000);
    // A short wait is worth retrying: no x-should-retry then.
    const short = await chat(t.url, { model: 'warmish', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(short.status, 503);
    assert.equal(short.headers.get('retry-after'), '20');
    assert.equal(short.headers.get('x-should-retry'), null);
  } finally {
    await t.close();
    hook.close();
  }
});

test('a quota’d tenant sees x-ratelimit-limit/remaining/reset for requests and tokens; others see none', async () => {
  const tenants =
    'kind: tenants\ntenants:\n' +
    '  - { id: paced, tier: free, api_key_sha256: [f3abf2a6cc4f00987743db5f544ba345b4899ae31f326d8ee9c4816de153c9e0], quotas: { requests_per_minute: 3, tokens_per_minute: 100000 } }\n' +
    `  - { id: free, tier: free, api_key_sha256: [${sha256('sk-free')}] }\n`;
  const t = await startTestRouter(files(tinyPool({ replicas: 1 }), { 'tenants.yaml': tenants }));
  try {
    // ~300 tokens a request: the bucket refills 1.7 a millisecond, so a charge of a few tokens could be refilled before a
    // loaded machine writes the headers; this one takes ~180 ms to refill.
    const prompt = 'hello there '.repeat(150);
    const ask = () => t.client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: prompt }], max_tokens: 4 }).withResponse();
    const first = (await ask()).response.headers;
    assert.equal(first.get('x-ratelimit-limit-requests'), '3');
    assert.equal(first.get('x-ratelimit-remaining-requests'), '2');
    assert.match(first.get('x-ratelimit-reset-requests') ?? '', /^(\d+ms|\d+s)$/);
    assert.equal(first.get('x-ratelimit-limit-tokens'), '100000');
    const tokensLeft = Number(first.get('x-ratelimit-remaining-tokens'));
    assert.ok(tokensLeft < 100000 && tokensLeft > 99000, `the request's tokens were taken (${tokensLeft} left)`);
    assert.match(first.get('x-ratelimit-reset-tokens') ?? '', /^(\d+ms|\d+s)$/);
    const second = (await ask()).response.headers;
    assert.equal(second.get('x-ratelimit-remaining-requests'), '1');
    // A stream carries them too (on its response headers, before the first chunk).
    const streamed = await t.client.chat.completions
      .create({ model: 'tiny', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 4, stream: true })
      .withResponse();
    assert.equal(streamed.response.headers.get('x-ratelimit-remaining-requests'), '0');
    for await (const chunk of streamed.data) void chunk;
    // Out of requests: the 429 carries the same headers, remaining 0.
    await assert.rejects(ask(), (e: unknown) => {
      assert.ok(e instanceof APIError);
      assert.equal(e.status, 429);
      assert.equal(e.headers?.get('x-ratelimit-limit-requests'), '3');
      assert.equal(e.headers?.get('x-ratelimit-remaining-requests'), '0');
      // Empty: a whole minute until the bucket is full again.
      assert.match(e.headers?.get('x-ratelimit-reset-requests') ?? '', /^(5\ds|1m0s)$/);
      assert.equal(e.headers?.get('x-should-retry'), null, 'a wait under a minute is worth retrying');
      return true;
    });
    const free = new OpenAI({ baseURL: `${t.url}/v1`, apiKey: 'sk-free', maxRetries: 0 });
    const unpaced = (await free.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 1 }).withResponse()).response
      .headers;
    assert.equal(unpaced.get('x-ratelimit-limit-requests'), null);
    assert.equal(unpaced.get('x-ratelimit-limit-tokens'), null);
  } finally {
    await t.close();
  }
});

test("an engine's own 503 Retry-After survives when every retry fails", async () => {
  const engines = await Promise.all(
    ['7', '12'].map(async (wait) => {
      const server = createServer((req, res) => {
        if (req.method === 'POST') {
          req.resume();
          return void res.writeHead(503, { 'retry-after': wait, 'content-type': 'application/json' }).end('{"error":{"message":"overloaded"}}');
        }
        res.writeHead(200).end(req.url === '/metrics' ? '' : '{}');
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return server;
    }),
  );
  const urls = engines.map((s) => `http://127.0.0.1:${(s.address() as AddressInfo).port}`);
  const pool = `kind: pools\npools:\n  - name: general\n    model: tiny\n    version: v1\n    limits: { max_model_len: 1024 }\n    strategies: [least-load]\n    replicas:\n${urls.map((u, i) => `      - { id: e${i}, url: "${u}" }`).join('\n')}\n`;
  const t = await startTestRouter(files(pool));
  try {
    const response = await chat(t.url, { model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 1 });
    assert.equal(response.status, 503);
    const wait = Number(response.headers.get('retry-after'));
    assert.ok(wait === 7 || wait === 12, `the engine's Retry-After is kept (got ${response.headers.get('retry-after')})`);
    const body = await json(response);
    assert.equal(body.error.type, 'service_unavailable_error');
    assert.match(body.error.message, new RegExp(`Retry after ${wait} s`));
  } finally {
    await t.close();
    for (const s of engines) s.close();
  }
});

test('a too-long prompt: 400 worded as OpenAI\'s ("maximum context length")', async () => {
  const t = await startTestRouter(files(tinyPool({ replicas: 1 })));
  try {
    await assert.rejects(
      t.client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'word '.repeat(3000) }], max_tokens: 10 }),
      (e: unknown) => {
        assert.ok(e instanceof BadRequestError);
        assert.equal(e.code, 'context_length_exceeded');
        // LangChain's ContextOverflowError test, and OpenAI's own sentence.
        assert.match(e.message, /maximum context length is 1024 tokens/);
        assert.match(e.message, /Shorten the prompt or lower max_tokens/);
        return true;
      },
    );
  } finally {
    await t.close();
  }
});

test('/v1/models lists models as vLLM does: created > 0, owned_by, max_model_len', async () => {
  const models = `${TINY_MODELS}aliases:\n  - { name: small, model: tiny }\n`;
  const t = await startTestRouter(files(tinyPool({ replicas: 1 }), { 'models.yaml': models }));
  try {
    const models = [];
    for await (const model of t.client.models.list()) models.push(model as OpenAI.Models.Model & { max_model_len?: number });
    const tiny = models.find((m) => m.id === 'tiny');
    assert.ok(tiny, 'tiny is listed');
    assert.equal(tiny.object, 'model');
    assert.ok(tiny.created > 1_700_000_000 && tiny.created <= Date.now() / 1000 + 1, `created is a real time (${tiny.created})`);
    assert.equal(tiny.owned_by, 'switchyard');
    assert.equal(tiny.max_model_len, 1024);
    const alias = models.find((m) => m.id === 'small');
    assert.ok(alias, 'the alias is listed');
    assert.equal(alias.max_model_len, 1024);
  } finally {
    await t.close();
  }
});

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');
