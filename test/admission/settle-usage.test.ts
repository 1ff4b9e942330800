// Token quotas settled on usage, through the real router: a tenant asking for
// max_tokens 4096 but using 20 keeps being admitted; the usage chunk the
// router asks for on a stream is never seen by a client that did not ask, and
// exactly once by one that did; usage that cannot be trusted leaves the
// estimate standing; a broken stream is charged what it delivered; a request
// that no replica answered costs nothing; a shadow quota never refuses.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import OpenAI from 'openai';
import type { Router } from '../../core/serve/server.ts';
import { until, startRouterOver } from '../helpers/router.ts';
import { UsageEngine, type UsageFault } from '../helpers/usage-engine.ts';

const sha = (key: string) => createHash('sha256').update(key).digest('hex');
const FAULTS: UsageFault[] = ['missing', 'negative', 'absurd', 'twice'];
const engine = new UsageEngine('u0');
let router: Router;

before(async () => {
  const url = await engine.start();
  const tenant = (id: string, quota: string) => `  - { id: ${id}, tier: free, quotas: { ${quota} }, api_key_sha256: [${sha(`sk-${id}`)}] }\n`;
  const files = {
    'models.yaml': 'kind: models\nmodels:\n  - id: tiny\n    versions: [{ version: v1 }]\n',
    'pools.yaml': `kind: pools\npools:\n  - name: general\n    model: tiny\n    version: v1\n    limits: { max_model_len: 8192 }\n    strategies: [least-load]\n    replicas:\n      - { id: u0, url: "${url}" }\n`,
    'tenants.yaml':
      'kind: tenants\ntenants:\n' +
      tenant('thrifty', 'tokens_per_minute: 10000') +
      tenant('streamer', 'tokens_per_minute: 10000') +
      tenant('shadowed', 'tokens_per_minute: 100, shadow: true') +
      tenant('cut', 'tokens_per_minute: 10000') +
      tenant('unlucky', 'tokens_per_minute: 10000') +
      FAULTS.map((f) => tenant(`bad-${f}`, 'tokens_per_minute: 10000')).join(''),
  };
  router = await startRouterOver(files, 1);
  await until(() => router.fleet.list().every((s) => s.health === 'ready'), 10_000, 'engine ready');
});

after(async () => {
  await router.close(1000);
  await engine.stop();
});

const client = (tenant: string) => new OpenAI({ baseURL: `${router.url}/v1`, apiKey: `sk-${tenant}`, maxRetries: 0, timeout: 10_000 });
const ask = { model: 'tiny', messages: [{ role: 'user' as const, content: 'Say something short.' }], max_tokens: 4096 };

async function status(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (error) {
    const s = (error as { status?: number }).status;
    if (s === undefined) throw error;
    return s;
  }
}

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${router.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

test('a tenant asking max_tokens 4096 but using 20 is not refused after two requests', async () => {
  engine.usageFault = 'none';
  engine.completionTokens = 20;
  // Each admission takes ~4100 of 10,000; settling gives back all but ~30.
  const statuses: number[] = [];
  for (let i = 0; i < 8; i++) statuses.push(await status(client('thrifty').chat.completions.create(ask)));
  assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 200, 200]);
  assert.ok((await metric('switchyard_quota_settlements_total{outcome="settled"}')) >= 8);
  assert.ok((await metric('switchyard_quota_settled_tokens_total{direction="refund"}')) > 8 * 4000);
});

test('a stream: the client that did not ask never sees the usage chunk, one that asked sees exactly one', async () => {
  engine.usageFault = 'none';
  let usageChunks = 0;
  let content = 0;
  const plain = await client('streamer').chat.completions.create({ ...ask, stream: true });
  for await (const chunk of plain) {
    if (chunk.usage) usageChunks++;
    if (chunk.choices.length === 0) usageChunks++; // the usage chunk has no choices
    content += chunk.choices[0]?.delta?.content ? 1 : 0;
  }
  assert.equal(usageChunks, 0);
  assert.equal(content, 20);
  assert.deepEqual(engine.bodies.at(-1)!.stream_options, { include_usage: true }, 'the router asked the engine for usage');
  // ...and settled on it: many more streams fit than the estimate would allow.
  for (let i = 0; i < 4; i++) {
    const s = await client('streamer').chat.completions.create({ ...ask, stream: true });
    for await (const _ of s);
  }
  let seen = 0;
  const asked = await client('streamer').chat.completions.create({ ...ask, stream: true, stream_options: { include_usage: true } });
  for await (const chunk of asked)
    if (chunk.usage) {
      seen++;
      assert.equal(chunk.usage.completion_tokens, 20);
    }
  assert.equal(seen, 1);
});

test('raw SSE bytes: nothing of the usage chunk reaches a client that did not ask', async () => {
  const response = await fetch(`${router.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-streamer' },
    body: JSON.stringify({ ...ask, stream: true }),
  });
  const text = await response.text();
  assert.doesNotMatch(text, /usage/);
  assert.match(text, /data: \[DONE\]\n\n$/);
  assert.equal(text.split('\n\n').filter((e) => e.startsWith('data: {')).length, 21); // role chunk + 20 tokens
});

for (const fault of FAULTS) {
  test(`usage that is ${fault}: the estimate stands, counted, and the tenant is refused on the third request`, async () => {
    engine.usageFault = fault;
    const before = await metric(`switchyard_quota_settlements_total{outcome="${fault === 'twice' ? 'duplicate' : fault === 'negative' ? 'invalid' : fault}"}`);
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push(await status(client(`bad-${fault}`).chat.completions.create(ask)));
    assert.deepEqual(statuses, [200, 200, 429]);
    const after = await metric(`switchyard_quota_settlements_total{outcome="${fault === 'twice' ? 'duplicate' : fault === 'negative' ? 'invalid' : fault}"}`);
    assert.equal(after - before, 2);
    engine.usageFault = 'none';
  });
}

test('a stream that breaks is charged what it delivered', async () => {
  engine.usageFault = 'cut_stream';
  engine.completionTokens = 40;
  const before = await metric('switchyard_quota_settlements_total{outcome="broken"}');
  for (let i = 0; i < 4; i++) {
    try {
      const s = await client('cut').chat.completions.create({ ...ask, stream: true });
      for await (const _ of s);
    } catch {
      // the stream ends with an error event: expected
    }
  }
  assert.equal((await metric('switchyard_quota_settlements_total{outcome="broken"}')) - before, 4);
  // Four estimates of ~4100 would have emptied the bucket; charged ~20 each, the fifth fits.
  engine.usageFault = 'none';
  assert.equal(await status(client('cut').chat.completions.create(ask)), 200);
  engine.completionTokens = 20;
});

test('a shadow quota counts and reports but never refuses', async () => {
  const before = await metric('switchyard_quota_shadow_over_total{tenant="shadowed"}');
  for (let i = 0; i < 3; i++) assert.equal(await status(client('shadowed').chat.completions.create(ask)), 200);
  assert.equal((await metric('switchyard_quota_shadow_over_total{tenant="shadowed"}')) - before, 3);
});

test('a request no replica answered gives its whole charge back, even when no replica is left to retry on', async () => {
  // One replica, failing before the first byte: the retry finds no other (a 503 that names the pool).
  engine.usageFault = 'none';
  engine.failWithStatus = 503;
  const failedBefore = await metric('switchyard_quota_settlements_total{outcome="failed"}');
  try {
    for (let i = 0; i < 4; i++) {
      // Each admission takes ~4100 of the tenant's 10,000 tokens a minute: unrefunded, the third would be a 429.
      const error = await client('unlucky')
        .chat.completions.create(ask)
        .then(
          () => undefined,
          (e: { status?: number; message?: string }) => e,
        );
      assert.equal(error?.status, 503, `request ${i}: ${error?.message}`);
      assert.match(String(error?.message), /No other replica of pool general/);
    }
  } finally {
    engine.failWithStatus = undefined;
  }
  assert.equal(await status(client('unlucky').chat.completions.create(ask)), 200, 'the tenant still has its quota');
  assert.equal((await metric('switchyard_quota_settlements_total{outcome="failed"}')) - failedBefore, 4);
});
