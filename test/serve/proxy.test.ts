// The router end to end: the official OpenAI client, the real router on
// loopback, real emulated engines behind it.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { OPEN_TENANTS, startTestRouter, TINY_MODELS, tinyPool, until, type TestRouter, json } from '../helpers/router.ts';

let t: TestRouter;
before(async () => {
  t = await startTestRouter({ 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': tinyPool({ replicas: 3 }) });
});
after(() => t.close());

test('a chat completion through the router, with the routing headers', async () => {
  const { data, response } = await t.client.chat.completions
    .create({ model: 'tiny', messages: [{ role: 'user', content: 'Say hello' }], max_tokens: 8 })
    .withResponse();
  assert.equal(data.object, 'chat.completion');
  assert.equal(data.usage?.completion_tokens, 8);
  assert.ok(data.choices[0].message.content!.length > 0);
  assert.equal(response.headers.get('x-switchyard-model'), 'tiny@v1');
  assert.equal(response.headers.get('x-switchyard-pool'), 'general');
  assert.match(response.headers.get('x-switchyard-replica')!, /^r[012]$/);
  assert.match(response.headers.get('x-switchyard-reason')!, /^power-of-two: /);
  assert.ok(response.headers.get('x-request-id'));
});

test('a streamed completion arrives chunk by chunk, with usage when asked', async () => {
  const stream = await t.client.chat.completions.create({
    model: 'tiny',
    messages: [{ role: 'user', content: 'Count to ten' }],
    max_tokens: 12,
    stream: true,
    stream_options: { include_usage: true },
  });
  let content = '';
  let chunks = 0;
  let usage;
  for await (const chunk of stream) {
    chunks++;
    content += chunk.choices[0]?.delta?.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  assert.ok(chunks >= 12, `${chunks} chunks`);
  assert.ok(content.length > 0);
  assert.equal(usage?.completion_tokens, 12);
});

test('the first streamed byte reaches the client before the engine has finished', async () => {
  // Not timing (this machine is shared): when the first chunk arrives, the engine is still generating.
  const engines = await Promise.all(['r0', 'r1', 'r2'].map((id) => t.embedded.emulator(id)!));
  const stream = await t.client.completions.create({ model: 'tiny', prompt: 'Once upon a time', max_tokens: 1000, stream: true });
  let runningAtFirstChunk: number | undefined;
  let chunks = 0;
  for await (const _chunk of stream) {
    runningAtFirstChunk ??= engines.reduce((sum, e) => sum + e.engine.snapshot().running, 0);
    chunks++;
  }
  assert.equal(runningAtFirstChunk, 1, 'the engine was still generating: not buffered');
  assert.ok(chunks >= 1000);
});

test('completions and embeddings pass through; unknown fields reach the engine untouched', async () => {
  const completion = await t.client.completions.create({ model: 'tiny', prompt: 'The sky is', max_tokens: 4, temperature: 0.2, seed: 7 } as never);
  assert.equal(completion.object, 'text_completion');
  const embedding = await t.client.embeddings.create({ model: 'tiny', input: 'a sentence' });
  assert.ok(embedding.data[0].embedding.length > 0);
});

test('session affinity seen through x-switchyard-replica', async () => {
  // The 1000-token stream above fills a tiny replica's KV cache (64 blocks of 16): until a
  // scrape shows it drained, the release valve would rightly send a conversation elsewhere.
  await until(() => ['r0', 'r1', 'r2'].every((id) => (t.router.fleet.replica(id)?.kvUsage ?? 1) < 0.5), 10_000, 'the fleet to drain');
  const replicaOf = async (conversation: string) => {
    const { response } = await t.client.chat.completions
      .create(
        { model: 'tiny', messages: [{ role: 'user', content: `turn in ${conversation}` }], max_tokens: 2 },
        { headers: { 'x-conversation-id': conversation } },
      )
      .withResponse();
    return `${response.headers.get('x-switchyard-replica')} (${response.headers.get('x-switchyard-reason')})`;
  };
  const homes = new Set<string>();
  for (let c = 0; c < 6; c++) {
    const first = await replicaOf(`conversation-${c}`);
    const home = first.split(' ')[0];
    for (let turn = 0; turn < 3; turn++) {
      const next = await replicaOf(`conversation-${c}`);
      assert.equal(next.split(' ')[0], home, `turn ${turn + 2} of conversation-${c}: ${next}, first: ${first}`);
    }
    homes.add(home);
  }
  assert.ok(homes.size > 1, 'different conversations land on different replicas');
});

test('GET /v1/models lists what the tenant may use', async () => {
  const models = await t.client.models.list();
  assert.deepEqual(
    models.data.map((m) => m.id),
    ['tiny'],
  );
});

test('a client abort reaches the engine, which frees the request', async () => {
  const controller = new AbortController();
  const stream = await t.client.chat.completions.create(
    { model: 'tiny', messages: [{ role: 'user', content: 'Write a long story' }], max_tokens: 1000, stream: true },
    { signal: controller.signal, headers: { 'x-conversation-id': 'to-abort' } },
  );
  let chunks = 0;
  try {
    for await (const _chunk of stream) {
      if (++chunks === 3) controller.abort();
    }
  } catch {
    // the abort ends the iteration
  }
  const decisions = await json(await fetch(`${t.adminUrl}/admin/decisions?limit=20`));
  const replica = decisions.decisions.find((d: { trace: { replica?: { reason: string } }; replica: string }) => d.replica)?.replica;
  assert.ok(replica);
  const engines = await Promise.all(['r0', 'r1', 'r2'].map((id) => t.embedded.emulator(id)!));
  await until(
    () => engines.every((e) => e.engine.snapshot().running === 0 && e.engine.snapshot().waiting === 0),
    5000,
    'the engines to drop the aborted request',
  );
  const aborted = engines.reduce((sum, e) => sum + e.engine.snapshot().finished.abort, 0);
  assert.equal(aborted, 1);
});

test('admin: recent decisions and router state, newest first', async () => {
  const decisions = await json(await fetch(`${t.adminUrl}/admin/decisions?limit=2`));
  assert.equal(decisions.decisions.length, 2);
  assert.ok(decisions.decisions[0].trace.model);
  const state = await json(await fetch(`${t.adminUrl}/admin/state`));
  assert.equal(state.policy.generation, 1);
  assert.deepEqual(state.replicas.map((r: { id: string }) => r.id).sort(), ['r0', 'r1', 'r2']);
  assert.ok(state.replicas.every((r: { scrapeAgeMs: number | null }) => r.scrapeAgeMs !== null && r.scrapeAgeMs < 5000));
});

test('/metrics has requests, decisions, timings and replica signals, with bounded labels', async () => {
  const text = await (await fetch(`${t.adminUrl}/metrics`)).text();
  for (const name of [
    'switchyard_requests_total{model="tiny",pool="tiny@v1/general",outcome="ok"}',
    'switchyard_replica_decisions_total{pool="tiny@v1/general",replica="r0"',
    'switchyard_decision_duration_seconds_bucket',
    'switchyard_upstream_ttfb_seconds_bucket{le="0.005",pool="tiny@v1/general"}',
    'switchyard_replica_kv_usage{replica="r1",pool="tiny@v1/general"}',
    'switchyard_replica_signal_age_seconds',
    'switchyard_policy_generation 1',
  ]) {
    assert.ok(text.includes(name), `missing ${name}`);
  }
  assert.doesNotMatch(text, /conversation|req-/);
});

test('by default clients see no replica, pool or strategy reason; a tenant flag opts one tenant in', async () => {
  const tenants = `kind: tenants\nanonymous: anon\ntenants:\n  - { id: anon, tier: free }\n  - { id: debug, tier: free, decision_headers: full, api_key_sha256: [f3abf2a6cc4f00987743db5f544ba345b4899ae31f326d8ee9c4816de153c9e0] }\n`;
  const quiet = await startTestRouter({
    'models.yaml': TINY_MODELS,
    'tenants.yaml': tenants,
    'pools.yaml': tinyPool({ replicas: 2 }),
    'settings.yaml': 'kind: settings\n',
  });
  try {
    const anonymous = await fetch(`${quiet.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny', prompt: 'hi', max_tokens: 1 }),
    });
    assert.equal(anonymous.status, 200);
    assert.equal(anonymous.headers.get('x-switchyard-model'), 'tiny@v1');
    assert.ok(anonymous.headers.get('x-request-id'));
    const shown = [...anonymous.headers.keys()].filter((name) => name.startsWith('x-switchyard-'));
    assert.deepEqual(shown, ['x-switchyard-model']);
    await anonymous.arrayBuffer();

    const { response } = await quiet.client.completions.create({ model: 'tiny', prompt: 'hi', max_tokens: 1 }).withResponse();
    assert.match(response.headers.get('x-switchyard-replica')!, /^r[01]$/, 'the debug tenant (the test key) sees where it went');
    assert.match(response.headers.get('x-switchyard-reason')!, /^power-of-two: /);
  } finally {
    await quiet.close();
  }
});
