// Priorities and shedding through the real router: engines report a queue
// (the scraped vLLM metrics), and sheddable requests are refused first while
// interactive ones still get in; a bad x-priority is a 400 naming the header;
// the priority reaches engines that schedule by it.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import OpenAI from 'openai';
import type { Router } from '../../core/serve/server.ts';
import { json, until, type Json, startRouterOver } from '../helpers/router.ts';
import { UsageEngine } from '../helpers/usage-engine.ts';

const sha = (key: string) => createHash('sha256').update(key).digest('hex');
const engines = [new UsageEngine('a0'), new UsageEngine('a1'), new UsageEngine('p0'), new UsageEngine('s0')];
let router: Router;

before(async () => {
  const [a0, a1, p0, s0] = await Promise.all(engines.map((e) => e.start()));
  const files = {
    'models.yaml': 'kind: models\nmodels:\n  - id: tiny\n    versions: [{ version: v1 }]\n',
    'pools.yaml':
      'kind: pools\npools:\n' +
      `  - name: shared\n    model: tiny\n    version: v1\n    capacity: { queue_depth: 10, retry_after_s: 3 }\n    forward_priority: true\n    strategies: [least-load]\n    replicas:\n      - { id: a0, url: "${a0}" }\n      - { id: a1, url: "${a1}" }\n` +
      `  - name: premium\n    model: tiny\n    version: v1\n    overflow: spare\n    capacity: { queue_depth: 10 }\n    strategies: [least-load]\n    replicas:\n      - { id: p0, url: "${p0}" }\n` +
      `  - name: spare\n    model: tiny\n    version: v1\n    strategies: [least-load]\n    replicas:\n      - { id: s0, url: "${s0}" }\n`,
    'rules.yaml':
      'kind: rules\npool_rules:\n  default_pool: shared\n  rules:\n    - { name: premium, conditions: { all: [{ fact: tenantTier, operator: equal, value: premium }] }, event: { type: pool, params: { pool: premium } } }\n',
    'tenants.yaml':
      'kind: tenants\ntenants:\n' +
      `  - { id: app, tier: standard, api_key_sha256: [${sha('sk-app')}] }\n` +
      `  - { id: nightly, tier: standard, default_priority: batch, api_key_sha256: [${sha('sk-nightly')}] }\n` +
      `  - { id: vip, tier: premium, max_priority: 5, api_key_sha256: [${sha('sk-vip')}] }\n`,
    'settings.yaml': 'kind: settings\ndecision_headers: full\npriority_names: { critical: 5, background: -3 }\n',
  };
  router = await startRouterOver(files, 7);
  await until(() => router.fleet.list().filter((s) => s.health === 'ready').length >= 4, 10_000, 'engines ready');
});

after(async () => {
  await router.close(1000);
  await Promise.all(engines.map((e) => e.stop()));
});

const client = (key: string) => new OpenAI({ baseURL: `${router.url}/v1`, apiKey: key, maxRetries: 0, timeout: 10_000 });

async function ask(key: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; body: Json }> {
  const response = await fetch(`${router.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, ...headers },
    body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: 5 }),
  });
  return { status: response.status, headers: response.headers, body: await json(response) };
}

async function setQueue(waiting: number): Promise<void> {
  for (const e of engines.slice(0, 2)) e.waiting = waiting;
  await until(
    () =>
      router.fleet
        .list()
        .filter((s) => s.id.startsWith('a'))
        .every((s) => s.queueDepth === waiting),
    10_000,
    `queue ${waiting} scraped`,
  );
}

test('under saturation sheddable requests get 503 shed_for_priority and interactive ones are admitted', async () => {
  await setQueue(4); // 40% of capacity: p = min(0.4^5 * 300, 1) = 1 for priority -1
  for (let i = 0; i < 5; i++) {
    const batch = await ask('sk-nightly'); // default_priority: batch (-1)
    assert.equal(batch.status, 503);
    assert.equal(batch.headers.get('x-switchyard-reject-reason'), 'shed_for_priority');
    assert.equal(batch.headers.get('retry-after'), '3');
    assert.equal(batch.body.error.code, 'shed_for_priority');
    assert.equal(batch.body.error.type, 'service_unavailable_error');
    assert.match(batch.body.error.message, /saturated.*priority -1.*Retry after 3 s/);
    const explicit = await ask('sk-app', { 'x-priority': 'batch' });
    assert.equal(explicit.status, 503);
    // Interactive traffic of the same pool still gets in.
    const interactive = await client('sk-app').chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 });
    assert.equal(interactive.choices.length, 1);
    assert.equal((await ask('sk-nightly', { 'x-priority': '0' })).status, 200);
  }
  // Counted by priority; the trace says why.
  const metrics = await (await fetch(`${router.adminUrl}/metrics`)).text();
  assert.match(metrics, /switchyard_shed_total\{pool="tiny@v1\/shared",priority="-1"\} 10/);
  const decisions = await json(await fetch(`${router.adminUrl}/admin/decisions?limit=50`));
  const list = Array.isArray(decisions) ? decisions : decisions.decisions;
  const shedOne = list.find((d: Json) => d.error?.code === 'shed_for_priority');
  assert.equal(shedOne.trace.admit.decidedBy, 'shedding');
  assert.equal(shedOne.trace.admit.facts.priority, -1);
  assert.equal(shedOne.trace.admit.facts.shedProbability, 1);
  assert.equal(shedOne.priority, -1);
});

test('below saturation nothing is shed, and at capacity everyone is refused', async () => {
  await setQueue(0);
  assert.equal((await ask('sk-nightly')).status, 200);
  await setQueue(10);
  const interactive = await ask('sk-app');
  assert.equal(interactive.status, 503);
  assert.equal(interactive.body.error.code, 'no_capacity');
  await setQueue(0);
});

test('a bad x-priority is a 400 naming the header; names from the policy work', async () => {
  for (const bad of ['urgent', '1.5', '9999', 'DROP TABLE', '-101']) {
    const r = await ask('sk-app', { 'x-priority': bad });
    assert.equal(r.status, 400, bad);
    assert.equal(r.body.error.param, 'x-priority');
    assert.match(r.body.error.message, /x-priority/);
  }
  assert.equal((await ask('sk-app', { 'x-priority': 'background' })).status, 200);
});

test('the priority is forwarded to engines as vLLM reads it (lower runs first), capped at the tenant max', async () => {
  const before = engines[0].bodies.length + engines[1].bodies.length;
  await ask('sk-app', { 'x-priority': 'critical' }); // app's max_priority is 0: capped
  await ask('sk-nightly');
  const bodies = [...engines[0].bodies, ...engines[1].bodies].slice(-2);
  assert.equal(engines[0].bodies.length + engines[1].bodies.length, before + 2);
  assert.deepEqual(bodies.map((b) => b.priority).sort(), [0, 1]);
});

test('a full pool overflows into the pool it names, and the trace says so', async () => {
  const premium = engines[2];
  premium.waiting = 10; // premium at capacity
  await until(() => router.fleet.list().find((s) => s.id === 'p0')?.queueDepth === 10, 10_000, 'premium full');
  const r = await ask('sk-vip');
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('x-switchyard-pool'), 'spare');
  const decision = await json(await fetch(`${router.adminUrl}/admin/decisions/${r.headers.get('x-request-id')}`));
  assert.equal(decision.trace.pool.decidedBy, 'overflow');
  assert.match(decision.trace.pool.reason, /premium at capacity → overflow to spare/);
  premium.waiting = 0;
  await until(() => router.fleet.list().find((s) => s.id === 'p0')?.queueDepth === 0, 10_000, 'premium empty');
  assert.equal((await ask('sk-vip')).headers.get('x-switchyard-pool'), 'premium');
});
