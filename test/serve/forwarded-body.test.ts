// What the engine receives is the client's bytes: byte for byte when the
// router changes nothing, with only the model's value (and the fields the
// router adds: stream_options.include_usage, priority) spliced in otherwise.
// An emulated vLLM records every body it receives; bodies carry unicode,
// escapes, duplicate keys, "model" inside a message's content and a property
// named `model` nested in a tool's schema, none of which may change.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createEnv } from '../../core/decide/env.ts';
import { fixedPolicy } from '../../core/serve/fixed-policy.ts';
import { startRouter, type Router } from '../../core/serve/server.ts';
import { startEmulator, type Emulator } from '../../sim/emulator/server.ts';
import { policyFrom } from '../helpers/core.ts';
import { until } from '../helpers/router.ts';

const received: Buffer[] = [];
let engine: Emulator;
let router: Router;
let priorityRouter: Router;

before(async () => {
  engine = await startEmulator({
    profile: 'tiny',
    speed: 50,
    servedModelName: 'tiny',
    onBody: (path, bytes) => path.startsWith('/v1/') && received.push(bytes),
  });
  const models = 'kind: models\nmodels:\n  - id: tiny\n    versions: [{ version: v1 }]\naliases:\n  - { name: tiny-alias, model: tiny }\n';
  const pool = (extra: string) =>
    `kind: pools\npools:\n  - name: general\n    model: tiny\n    version: v1\n${extra}    strategies: [least-load]\n    replicas:\n      - { id: e0, url: "${engine.url}" }\n`;
  // A token quota: the router asks a stream for its usage chunk when the client did not.
  const tenants = 'kind: tenants\nanonymous: anon\ntenants:\n  - { id: anon, tier: free, quotas: { tokens_per_minute: 10000000 } }\n';
  const start = (files: Record<string, string>) =>
    startRouter({
      policy: fixedPolicy(policyFrom(files)),
      port: 0,
      logger: false,
      scrapeIntervalMs: 30,
      healthIntervalMs: 30,
      admin: false,
      env: createEnv({ seed: 1 }),
    });
  router = await start({ 'models.yaml': models, 'pools.yaml': pool(''), 'tenants.yaml': tenants });
  priorityRouter = await start({
    'models.yaml': models,
    'pools.yaml': pool('    forward_priority: true\n'),
    'tenants.yaml': 'kind: tenants\nanonymous: anon\ntenants:\n  - { id: anon, tier: free, max_priority: 5 }\n',
  });
  await until(() => [router, priorityRouter].every((r) => r.fleet.list().every((s) => s.health === 'ready')), 10_000, 'engine ready');
});

after(async () => {
  await router.close(1000);
  await priorityRouter.close(1000);
  await engine.close();
});

/** Sends `text` as the body, and returns the bytes the engine got for it. */
async function forwarded(text: string | Buffer, options: { to?: Router; headers?: Record<string, string>; status?: number } = {}): Promise<Buffer> {
  const before = received.length;
  const response = await fetch(`${(options.to ?? router).url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...options.headers },
    body: typeof text === 'string' ? text : new Uint8Array(text),
  });
  const answer = await response.text();
  assert.equal(response.status, options.status ?? 200, answer);
  assert.equal(received.length, before + 1, 'the engine got one request');
  return received[before];
}

// @M@ marks the top-level `model` values; everything else must reach the engine as written.
const TEMPLATE =
  '{ "model" : @M@,\n' +
  '  "messages": [\n' +
  '    {"role": "system", "content": "R\\u00e9ponds en fran\u00e7ais. \\"model\\": \\"not-this\\" \\\\\\" \\ud83d\\ude00 \u{1F600} \\/ \\n"},\n' +
  '    {"role": "user", "content": "{\\"model\\":\\"tiny-alias\\"}  \\"model\\" : \\"x\\""}],\n' +
  '  "tools": [{"type": "function", "function": {"name": "pick", "parameters": {"type": "object", "properties": {"model": {"type": "string", "enum": ["tiny-alias"]}}}}}],\n' +
  '  "temperature": 0.5, "temperature": 0.7,\n' +
  '  "max_tokens": 3,\n' +
  '  "metadata": {"model": "tiny-alias", "n": [1, {"model": "tiny-alias"}]},\n' +
  '  "model":@M@\n' +
  '}\n';

test('a body whose model the router keeps goes to the engine byte for byte', async () => {
  const text = TEMPLATE.replaceAll('@M@', '"tiny"');
  assert.equal((await forwarded(text)).toString('utf8'), text);
});

test('a rewritten model is spliced into the client bytes: every top-level model value, nothing nested, nothing else', async () => {
  const got = await forwarded(TEMPLATE.replaceAll('@M@', '"tiny-alias"'));
  assert.equal(got.toString('utf8'), TEMPLATE.replaceAll('@M@', '"tiny"'));
});

test('a key spelled with escapes is the key JSON reads: "mod\\u0065l" is rewritten too', async () => {
  const template = '{"mod\\u0065l":@M@,"messages":[{"role":"user","content":"hi"}],"max_tokens":2}';
  assert.equal((await forwarded(template.replace('@M@', '"tiny-alias"'))).toString('utf8'), template.replace('@M@', '"tiny"'));
});

test('stream_options.include_usage is appended on a stream the quota settles on usage, the rest kept', async () => {
  const base = '{"model":"tiny","messages":[{"role":"user","content":"caf\u00e9"}],"max_tokens":2,"stream":true';
  assert.equal((await forwarded(`${base}}`)).toString('utf8'), `${base},"stream_options":{"include_usage":true}}`);
  assert.equal(
    (await forwarded(`${base},"stream_options":{"continuous_usage_stats":false} }`)).toString('utf8'),
    `${base},"stream_options":{"continuous_usage_stats":false,"include_usage":true} }`,
  );
  assert.equal((await forwarded(`${base},"stream_options":{ }}`)).toString('utf8'), `${base},"stream_options":{ "include_usage":true}}`);
  assert.equal((await forwarded(`${base},"stream_options":null}`)).toString('utf8'), `${base},"stream_options":{"include_usage":true}}`);
  // The client asked for usage itself: nothing to add.
  const asked = `${base},"stream_options":{"include_usage":true}}`;
  assert.equal((await forwarded(asked)).toString('utf8'), asked);
});

test('a forwarded priority is appended, or replaces the one the client sent', async () => {
  const base = '{"model":"tiny-alias","messages":[{"role":"user","content":"hi"}],"max_tokens":2';
  const expected = '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":2';
  // vLLM runs lower values first: x-priority 3 goes as -3.
  assert.equal((await forwarded(`${base}}`, { to: priorityRouter, headers: { 'x-priority': '3' } })).toString('utf8'), `${expected},"priority":-3}`);
  assert.equal(
    (await forwarded(`${base},"priority":9}`, { to: priorityRouter, headers: { 'x-priority': '3' } })).toString('utf8'),
    `${expected},"priority":-3}`,
  );
});

test('bytes that are not valid UTF-8 are not passed on: the engine gets the body as the router read it', async () => {
  const text = Buffer.concat([
    Buffer.from('{"model":"tiny","messages":[{"role":"user","content":"a'),
    Buffer.from([0xff, 0xfe]),
    Buffer.from('b"}],"max_tokens":2}'),
  ]);
  const got = await forwarded(text);
  assert.deepEqual(JSON.parse(got.toString('utf8')), { model: 'tiny', messages: [{ role: 'user', content: 'a\ufffd\ufffdb' }], max_tokens: 2 });
  assert.ok(!got.includes(Buffer.from([0xff])), 'no invalid byte reaches the engine');
});

test('a body of more than 512 KiB (parsed in turns of the event loop) goes byte for byte too; a malformed one is a 400', async () => {
  const text = `{"model": "tiny", "messages": [{"role": "user", "content": "${'caf\u00e9 \\"au lait\\" '.repeat(40_000)}"}], "max_tokens": 2}`;
  assert.ok(Buffer.byteLength(text) > 512 * 1024);
  // The tiny engine's context is 1,024 tokens: it refuses the prompt (its own 400, passed on), having received it.
  assert.equal((await forwarded(text, { status: 400 })).toString('utf8'), text);
  const response = await fetch(`${router.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: text.slice(0, -1),
  });
  assert.equal(response.status, 400);
  assert.equal(typeof ((await response.json()) as { error: { message: string } }).error.message, 'string');
});
