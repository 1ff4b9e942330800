// The smaller hardening items, over the real server with the official
// client: a property named `__proto__` in a tool schema is accepted safely; a body over the limit is a 413 the client
// sees (not EPIPE), from the Content-Length or while it uploads; requests
// refused before routing (a schema 400, a 404, an HTTP parse error) each
// write a log line.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import OpenAI from 'openai';
import pino from 'pino';
import { Writable } from 'node:stream';
import { rawExchange } from './raw-http.ts';
import { OPEN_TENANTS, startTestRouter, TEST_KEY, TINY_MODELS, tinyPool, until } from '../helpers/router.ts';

const files = { 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': tinyPool({ replicas: 1 }) };

test('a tool schema with a property named __proto__ is accepted and answered, and pollutes nothing', async () => {
  const t = await startTestRouter(files);
  try {
    const text =
      '{"model":"tiny","max_tokens":2,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"__proto__":{"type":"string"},"constructor":{"type":"object","properties":{"prototype":{"type":"string"}}}}}}}]}';
    const response = await fetch(`${t.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_KEY}` },
      body: text,
    });
    assert.equal(response.status, 200, await response.clone().text());
    assert.equal(({} as Record<string, unknown>).type, undefined, 'Object.prototype untouched');
    assert.equal(Object.getPrototypeOf({}), Object.prototype);
  } finally {
    await t.close();
  }
});

test('a body over the limit: the official client and node:http see the 413, whether they send Content-Length or stream it', async () => {
  const t = await startTestRouter(files, { limits: { bodyLimitBytes: 8 * 1024 * 1024 } });
  try {
    const client = new OpenAI({ baseURL: `${t.url}/v1`, apiKey: TEST_KEY, maxRetries: 0, timeout: 20_000 });
    const big = 'x'.repeat(40 * 1024 * 1024);
    await assert.rejects(client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: big }] }), (error: unknown) => {
      assert.equal((error as { status?: number }).status, 413, String(error));
      assert.match((error as Error).message, /larger than this router accepts/);
      return true;
    });
    // Chunked: no Content-Length to judge by; the limit is met while reading.
    const chunked = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(
        `${t.url}/v1/chat/completions`,
        { method: 'POST', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } },
        (res) => {
          let body = '';
          res.on('data', (c) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        },
      );
      req.on('error', reject);
      req.write(`{"model":"tiny","messages":[{"role":"user","content":"`);
      for (let i = 0; i < 400; i++) req.write('y'.repeat(64 * 1024));
      req.end('"}]}');
    });
    assert.equal(chunked.status, 413);
    assert.equal(JSON.parse(chunked.body).error.code, 'payload_too_large');
    // And the router still serves.
    const ok = await client.chat.completions.create({ model: 'tiny', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] });
    assert.ok(ok.choices.length > 0);
  } finally {
    await t.close();
  }
});

test('refused before routing (a schema 400, a 404, an HTTP parse error): each writes a log line, and a flood of them is bounded', async () => {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _encoding, callback) {
      for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line));
      callback();
    },
  });
  const t = await startTestRouter(files, { logger: pino({ level: 'info' }, sink) });
  try {
    const logged = (message: string) => lines.filter((l) => l.msg === message);
    const post = (body: string) => fetch(`${t.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    assert.equal((await post('{"model":"tiny","messages":"not a list"}')).status, 400);
    assert.equal((await post('{"model":')).status, 400);
    assert.equal((await fetch(`${t.url}/v1/nope?key=secret`)).status, 404);
    const parse = await rawExchange(t.url, 'GET /v1/models HTTP/1.1\r\nHost: x\r\nBad Header: x\r\n\r\n');
    assert.equal(parse.status, 400);
    // pino writes asynchronously: wait for the lines (generously: the machine may be loaded).
    await until(
      () => logged('refused before routing').length >= 2 && logged('no such route').length >= 1 && logged('not valid HTTP; connection closed').length >= 1,
      10_000,
      'the log lines',
    );
    const refused = logged('refused before routing');
    assert.equal(refused.length, 2, JSON.stringify(lines));
    assert.equal(refused[0].status, 400);
    assert.equal(refused[0].path, '/v1/chat/completions');
    assert.match(String(refused[0].detail), /messages/);
    assert.match(String(refused[1].detail), /not valid JSON/);
    const missing = logged('no such route');
    assert.equal(missing.length, 1);
    assert.equal(missing[0].path, '/v1/nope', 'the query string is not logged');
    assert.equal(logged('not valid HTTP; connection closed').length, 1);
    // 300 404s in a burst: at most 20 lines a second, the rest counted.
    const started = Date.now();
    await Promise.all(Array.from({ length: 300 }, () => fetch(`${t.url}/flood`).then((r) => r.text())));
    const windows = Math.ceil((Date.now() + 1000 - started) / 1000) + 1;
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const flood = logged('no such route');
    assert.ok(flood.length <= 1 + 20 * windows, `${flood.length} lines for 301 requests in ${windows} s windows`);
    // What a window dropped is counted on the next line that goes out: one more 404, a second later, carries it.
    assert.equal((await fetch(`${t.url}/after-the-flood`)).status, 404);
    await until(() => logged('no such route').some((l) => l.path === '/after-the-flood'), 10_000, 'the line after the flood');
    if (flood.length < 301)
      assert.ok(
        logged('no such route').some((l) => Number(l.linesDropped) > 0),
        'dropped lines are counted',
      );
  } finally {
    await t.close();
  }
});
