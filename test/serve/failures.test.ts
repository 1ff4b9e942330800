// What goes wrong, and what the client sees: dying replicas, saturation,
// rejections with their shapes and headers (docs/serving.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { APIError } from 'openai';
import { OPEN_TENANTS, startTestRouter, TEST_KEY, TINY_MODELS, tinyPool, until, json } from '../helpers/router.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const files = (pool: string, extra: Record<string, string> = {}) => ({
  'models.yaml': TINY_MODELS,
  'tenants.yaml': OPEN_TENANTS,
  'pools.yaml': pool,
  ...extra,
});

async function conversationOn(t: Awaited<ReturnType<typeof startTestRouter>>, replica: string): Promise<string> {
  for (let c = 0; c < 200; c++) {
    const { response } = await t.client.chat.completions
      .create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }, { headers: { 'x-conversation-id': `find-${c}` } })
      .withResponse();
    if (response.headers.get('x-switchyard-replica') === replica) return `find-${c}`;
  }
  throw new Error(`no conversation lands on ${replica}`);
}

test('a replica killed before a request: the request is retried on another, nothing is lost', async () => {
  const t = await startTestRouter(files(tinyPool({ replicas: 3 })));
  try {
    const conversation = await conversationOn(t, 'r0');
    await (await t.embedded.emulator('r0'))!.close();
    const { data, response } = await t.client.chat.completions
      .create({ model: 'tiny', messages: [{ role: 'user', content: 'still there?' }], max_tokens: 3 }, { headers: { 'x-conversation-id': conversation } })
      .withResponse();
    assert.equal(data.usage?.completion_tokens, 3);
    assert.notEqual(response.headers.get('x-switchyard-replica'), 'r0');
    // Either retried after a refused connection, or already excluded by health checks.
    const metrics = await (await fetch(`${t.adminUrl}/metrics`)).text();
    const retried = response.headers.get('x-switchyard-retried') === 'true';
    assert.ok(retried || t.router.fleet.replica('r0')?.health === 'failing');
    if (retried) assert.match(metrics, /switchyard_retries_total\{pool="tiny@v1\/general",cause="connect"\} 1/);
    await until(() => t.router.fleet.replica('r0')?.health === 'failing', 3000, 'health checks to exclude r0');
    for (let i = 0; i < 5; i++) {
      const again = await t.client.chat.completions
        .create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 1 }, { headers: { 'x-conversation-id': conversation } })
        .withResponse();
      assert.equal(again.response.headers.get('x-switchyard-retried'), null, 'excluded now: no retry needed');
    }
  } finally {
    await t.close();
  }
});

test('a replica killed during a stream: the stream ends with a clean OpenAI-shaped error event', async () => {
  // A replica in its own process, killed for real (SIGKILL) mid-stream.
  const engine = spawn(process.execPath, ['bin/switchyard.mjs', 'emulate', '--port', '0', '--profile', 'tiny', '--speed', '2', '--model', 'tiny'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    engine.stdout!.once('data', (data: Buffer) => resolve(data.toString().trim().split('\n')[0]));
    engine.once('exit', () => reject(new Error('the emulator exited')));
  });
  const pool = `kind: pools\npools:\n  - name: general\n    model: tiny\n    version: v1\n    strategies: [round-robin]\n    replicas:\n      - { id: r0, url: "${url}" }\n      - { id: r1, url: "emulate://tiny" }\n`;
  const t = await startTestRouter(files(pool));
  try {
    const { data: stream, response } = await t.client.chat.completions
      .create({ model: 'tiny', messages: [{ role: 'user', content: 'a long answer' }], max_tokens: 900, stream: true })
      .withResponse();
    assert.equal(response.headers.get('x-switchyard-replica'), 'r0');
    let chunks = 0;
    let error: unknown;
    try {
      for await (const _chunk of stream) if (++chunks === 5) engine.kill('SIGKILL');
    } catch (e) {
      error = e;
    }
    assert.ok(chunks >= 5 && chunks < 900, `${chunks} chunks before the end`);
    assert.ok(error instanceof APIError, `the client sees an API error, not a hang or a silent cut: ${error}`);
    assert.match((error as APIError).message, /failed mid-way/);
    // The router is still serving, on the replica that is left.
    const ok = await t.client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 1 });
    assert.equal(ok.usage?.completion_tokens, 1);
  } finally {
    engine.kill('SIGKILL');
    await t.close();
  }
});

test('every replica down: 503 with Retry-After, and the router stays up', async () => {
  const t = await startTestRouter(files(tinyPool({ replicas: 2 })));
  try {
    await Promise.all(['r0', 'r1'].map(async (id) => (await t.embedded.emulator(id))!.close()));
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`${t.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_KEY}` },
        body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'anyone?' }] }),
      });
      assert.equal(response.status, 503);
      assert.ok(Number(response.headers.get('retry-after')) >= 1);
      assert.equal(response.headers.get('x-switchyard-reject-reason'), 'no_healthy_replica');
      const body = await json(response);
      assert.equal(body.error.code, 'no_healthy_replica');
      assert.equal(body.error.type, 'service_unavailable_error');
    }
    assert.equal((await fetch(`${t.url}/healthz`)).status, 200);
  } finally {
    await t.close();
  }
});

test('a saturated replica is deprioritized, not excluded', async () => {
  const t = await startTestRouter(files(tinyPool({ replicas: 2, strategies: '[random]', extra: '    saturation: { kv_usage: 0.3, queue_depth: 100 }\n' })), {
    speed: 1,
  });
  const fill = async (id: string) => {
    const emulator = (await t.embedded.emulator(id))!;
    emulator.engine.submit({ id: `fill-${id}`, promptTokens: 600, maxTokens: 300 });
    await until(() => (t.router.fleet.replica(id)?.kvUsage ?? 0) >= 0.3, 3000, `${id} to look saturated`);
    return () => emulator.engine.cancel(`fill-${id}`);
  };
  try {
    const freeR0 = await fill('r0');
    const picks = new Set<string | null>();
    for (let i = 0; i < 8; i++) {
      const { response } = await t.client.completions.create({ model: 'tiny', prompt: 'x', max_tokens: 1 }).withResponse();
      picks.add(response.headers.get('x-switchyard-replica'));
    }
    assert.deepEqual([...picks], ['r1'], 'the unsaturated replica takes the traffic');
    const freeR1 = await fill('r1');
    const served = new Set<string | null>();
    for (let i = 0; i < 12; i++) {
      const { response } = await t.client.completions.create({ model: 'tiny', prompt: 'x', max_tokens: 1 }).withResponse();
      assert.equal(response.status, 200);
      served.add(response.headers.get('x-switchyard-replica'));
    }
    assert.equal(served.size, 2, 'all saturated: both still serve, none is excluded');
    freeR0();
    freeR1();
  } finally {
    await t.close();
  }
});

test('rejections: 400, 413, 429, 404 and 403 in OpenAI shape with the right headers', async () => {
  const quotaTenants = OPEN_TENANTS.replace('tier: free,', 'tier: free, quotas: { requests_per_minute: 2 },');
  const t = await startTestRouter(
    files(tinyPool({ replicas: 1 }), { 'tenants.yaml': quotaTenants, 'settings.yaml': 'kind: settings\nbody_limit_bytes: 4096\n' }),
  );
  const post = (body: string, headers: Record<string, string> = {}) =>
    fetch(`${t.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_KEY}`, ...headers },
      body,
    });
  const expectError = async (response: Response, status: number, code: string) => {
    assert.equal(response.status, status);
    const body = await json(response);
    assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type']);
    assert.equal(body.error.code, code);
    assert.equal(response.headers.get('x-switchyard-reject-reason'), code);
    assert.doesNotMatch(body.error.message, /\n\s+at /, 'no stack trace');
    return body;
  };
  try {
    const truncated = await expectError(await post('{"model": "tiny", "messages": ['), 400, 'invalid_request');
    assert.match(truncated.error.message, /not valid JSON: .+\. Send the whole body as one JSON object/, 'says what is wrong and what to do');
    const wrongType = await expectError(await post(JSON.stringify({ model: 'tiny', messages: 'hello' })), 400, 'invalid_request');
    assert.equal(wrongType.error.param, 'messages');
    const tooLarge = await expectError(
      await post(JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'x'.repeat(10_000) }] })),
      413,
      'payload_too_large',
    );
    assert.match(tooLarge.error.message, /\(4096 bytes, settings body_limit_bytes\)\. Send a shorter prompt/, 'the 413 names the limit and what to do');
    await expectError(await post(JSON.stringify({ model: 'nope', messages: [{ role: 'user', content: 'x' }] })), 404, 'model_not_found');
    await expectError(
      await post(JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'x' }] }), { authorization: 'Bearer sk-wrong' }),
      401,
      'invalid_api_key',
    );
    assert.equal((await post(JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 1 }))).status, 200);
    assert.equal((await post(JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 1 }))).status, 200);
    const limited = await post(JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 1 }));
    await expectError(limited, 429, 'quota_exceeded');
    assert.equal(limited.headers.get('retry-after'), '30');
    const unknownRoute = await fetch(`${t.url}/v1/nothing`);
    assert.equal(unknownRoute.status, 404);
    assert.equal((await json(unknownRoute)).error.code, 'route_not_found');
    // The official client sees the same as typed errors.
    await assert.rejects(
      t.client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }] }),
      (e: unknown) => e instanceof APIError && e.status === 429,
    );
  } finally {
    await t.close();
  }
});

test('a cold model: 503 with the long Retry-After, and its load hook called once while pending', async () => {
  let hookCalls = 0;
  const hook = createServer((req, res) => {
    hookCalls++;
    req.resume();
    res.end('{}');
  });
  await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve));
  const models = `${TINY_MODELS}  - id: giant\n    cold: { load_hook: "http://127.0.0.1:${(hook.address() as AddressInfo).port}/load", retry_after_s: 240 }\n`;
  const t = await startTestRouter(files(tinyPool({ replicas: 1 }), { 'models.yaml': models }));
  try {
    const responses = await Promise.all(
      Array.from({ length: 5 }, () =>
        fetch(`${t.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_KEY}` },
          body: JSON.stringify({ model: 'giant', messages: [{ role: 'user', content: 'x' }] }),
        }),
      ),
    );
    for (const response of responses) {
      assert.equal(response.status, 503);
      assert.equal(response.headers.get('retry-after'), '240');
      assert.equal((await json(response)).error.code, 'model_cold');
    }
    await until(() => hookCalls > 0, 2000, 'the load hook');
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(hookCalls, 1);
  } finally {
    await t.close();
    hook.close();
  }
});

test('admin routes need the token when SWITCHYARD_ADMIN_TOKEN is set', async () => {
  const t = await startTestRouter(files(tinyPool({ replicas: 1 })), { adminToken: 's3cret' });
  try {
    const denied = await fetch(`${t.adminUrl}/admin/state`);
    assert.equal(denied.status, 403);
    assert.equal((await json(denied)).error.type, 'permission_error');
    const allowed = await fetch(`${t.adminUrl}/admin/state`, { headers: { authorization: 'Bearer s3cret' } });
    assert.equal(allowed.status, 200);
    const drained = await fetch(`${t.adminUrl}/admin/replicas/r0/drain`, {
      method: 'POST',
      headers: { authorization: 'Bearer s3cret', 'content-type': 'application/json' },
      body: '{"draining": true}',
    });
    assert.equal(drained.status, 200);
    const response = await fetch(`${t.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_KEY}` },
      body: JSON.stringify({ model: 'tiny', prompt: 'x' }),
    });
    assert.equal(response.status, 503, 'the only replica is draining');
  } finally {
    await t.close();
  }
});
