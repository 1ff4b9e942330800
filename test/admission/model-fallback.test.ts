// A model's fallback model (models.yaml `fallback`) through the real router:
// when every pool of the model is at capacity after pool overflow, a tenant
// allowed to use the fallback gets it (the upstream body names it, the
// headers, trace and metrics say so); a tenant that may not use it gets the
// normal 503. And what validate refuses: loops, unknown and cold targets.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import OpenAI from 'openai';
import { formatProblem } from '../../core/diagnostics/problem.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import { buildSnapshot } from '../../core/decide/load.ts';
import type { Router } from '../../core/serve/server.ts';
import { builtinRegistry } from '../helpers/builtins.ts';
import { json, until, startRouterOver } from '../helpers/router.ts';
import { UsageEngine } from '../helpers/usage-engine.ts';

const sha = (key: string) => createHash('sha256').update(key).digest('hex');
// big's main pool overflows into big's spare pool; both full → small.
const engines = [new UsageEngine('b0'), new UsageEngine('b1'), new UsageEngine('s0')];
const [bigMain, bigSpare, small] = engines;
let router: Router;

before(async () => {
  const [b0, b1, s0] = await Promise.all(engines.map((e) => e.start()));
  const files = {
    'models.yaml':
      'kind: models\nmodels:\n  - id: big\n    fallback: small\n    versions: [{ version: v1 }]\n  - id: small\n    versions: [{ version: v2 }]\naliases:\n  - { name: chat-large, model: big }\n',
    'pools.yaml':
      'kind: pools\npools:\n' +
      `  - name: main\n    model: big\n    version: v1\n    overflow: spare\n    capacity: { queue_depth: 5, retry_after_s: 4 }\n    strategies: [least-load]\n    replicas:\n      - { id: b0, url: "${b0}" }\n` +
      `  - name: spare\n    model: big\n    version: v1\n    capacity: { queue_depth: 5, retry_after_s: 4 }\n    strategies: [least-load]\n    replicas:\n      - { id: b1, url: "${b1}" }\n` +
      `  - name: general\n    model: small\n    version: v2\n    strategies: [least-load]\n    replicas:\n      - { id: s0, url: "${s0}" }\n`,
    'rules.yaml': 'kind: rules\npool_rules:\n  default_pool: main\n  rules: []\n',
    'tenants.yaml':
      'kind: tenants\ntenants:\n' +
      `  - { id: app, tier: standard, api_key_sha256: [${sha('sk-app')}] }\n` +
      `  - { id: locked, tier: standard, allowed_models: [big], api_key_sha256: [${sha('sk-locked')}] }\n`,
    'settings.yaml': 'kind: settings\ndecision_headers: full\n',
  };
  router = await startRouterOver(files, 3);
  await until(() => router.fleet.list().filter((s) => s.health === 'ready').length >= 3, 10_000, 'engines ready');
});

after(async () => {
  await router.close(1000);
  await Promise.all(engines.map((e) => e.stop()));
});

const client = (key: string) => new OpenAI({ baseURL: `${router.url}/v1`, apiKey: key, maxRetries: 0, timeout: 10_000 });

async function setBigQueue(waiting: number): Promise<void> {
  bigMain.waiting = waiting;
  bigSpare.waiting = waiting;
  await until(
    () =>
      router.fleet
        .list()
        .filter((s) => s.id.startsWith('b'))
        .every((s) => s.queueDepth === waiting),
    10_000,
    `big's queues at ${waiting}`,
  );
}

test('with every pool of a model full, an allowed tenant gets its fallback model, and headers, trace and metrics say so', async () => {
  await setBigQueue(5);
  try {
    const smallBefore = small.bodies.length;
    const { data, response } = await client('sk-app')
      .chat.completions.create({ model: 'chat-large', messages: [{ role: 'user', content: 'hello' }], max_tokens: 5 })
      .withResponse();
    assert.equal(data.choices.length, 1);
    assert.equal(response.headers.get('x-switchyard-fallback-from'), 'big');
    assert.equal(response.headers.get('x-switchyard-model'), 'small@v2');
    assert.equal(response.headers.get('x-switchyard-pool'), 'general');
    // The engine was asked for the fallback model by its own name.
    assert.equal(small.bodies.length, smallBefore + 1);
    assert.equal(small.bodies.at(-1)!.model, 'small');
    assert.equal(data.model, 'small');

    const decision = await json(await fetch(`${router.adminUrl}/admin/decisions/${response.headers.get('x-request-id')}`));
    assert.equal(decision.model, 'small');
    assert.equal(decision.trace.model.decidedBy, 'fallback');
    assert.match(decision.trace.model.reason, /alias "chat-large" → big; every pool of big refused \(spare at capacity\) → fallback to small/);
    assert.equal(decision.trace.model.facts.fallbackFrom, 'big');
    // The model step names both the overflow it tried and the pool it then left.
    assert.ok(decision.trace.model.alternatives.some((a: { name: string; note?: string }) => a.name === 'big' && /spare at capacity/.test(a.note ?? '')));
    const metrics = await (await fetch(`${router.adminUrl}/metrics`)).text();
    assert.match(metrics, /switchyard_model_fallbacks_total\{from="big",to="small"\} 1\b/);
  } finally {
    await setBigQueue(0);
  }
});

test('a tenant that may not use the fallback gets the normal 503, and the trace says why it did not fall back', async () => {
  await setBigQueue(5);
  try {
    const error = await client('sk-locked')
      .chat.completions.create({ model: 'big', messages: [{ role: 'user', content: 'hello' }], max_tokens: 5 })
      .then(
        () => undefined,
        (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
      );
    assert.ok(error instanceof OpenAI.APIError, 'refused');
    assert.equal(error.status, 503);
    assert.equal((error.error as { code?: string }).code, 'no_capacity');
    assert.equal(error.headers?.get('retry-after'), '4');
    const decision = await json(await fetch(`${router.adminUrl}/admin/decisions/${error.headers?.get('x-request-id')}`));
    assert.equal(decision.model, 'big');
    assert.equal(decision.trace.admit.decidedBy, 'capacity');
    assert.equal(decision.trace.admit.facts.noFallback, 'tenant locked may not use fallback small');
  } finally {
    await setBigQueue(0);
  }
});

test("with room in the model's own pools, nothing falls back", async () => {
  const { response } = await client('sk-app')
    .chat.completions.create({ model: 'big', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 })
    .withResponse();
  assert.equal(response.headers.get('x-switchyard-fallback-from'), null);
  assert.equal(response.headers.get('x-switchyard-model'), 'big@v1');
  assert.equal(bigMain.bodies.at(-1)!.model, 'big');
});

const load = (files: Record<string, string>) => buildSnapshot(policyInputsFromTexts(files, { registry: builtinRegistry }));
const model = (id: string, extra = '') => `  - id: ${id}\n${extra}    versions: [{ version: v1 }]\n`;
const pool = (m: string) =>
  `  - name: p-${m}\n    model: ${m}\n    version: v1\n    strategies: [least-load]\n    replicas:\n      - { id: r-${m}, url: "http://127.0.0.1:9000" }\n`;
function problems(models: string, pools: string[]): string[] {
  const result = load({
    'models.yaml': `kind: models\nmodels:\n${models}`,
    'pools.yaml': `kind: pools\npools:\n${pools.map(pool).join('')}`,
    'tenants.yaml': 'kind: tenants\nanonymous: t\ntenants:\n  - { id: t, tier: free }\n',
  });
  assert.equal(result.snapshot, undefined, 'refused');
  return result.problems.map(formatProblem);
}

test('validate refuses a fallback loop with its chain, an unknown, cold or self fallback, each at FILE:LINE:COL', () => {
  const loop = problems(model('a', '    fallback: b\n') + model('b', '    fallback: c\n') + model('c', '    fallback: a\n'), ['a', 'b', 'c']);
  assert.ok(
    loop.some((l) => /^models\.yaml:4:15: model fallback loops: a -> b -> c -> a; end the chain/.test(l)),
    loop.join('\n'),
  );
  const typo = problems(model('a', '    fallback: smal\n') + model('small'), ['a', 'small']);
  assert.ok(
    typo.some((l) => /^models\.yaml:\d+:\d+: model "a" falls back to an unknown model "smal" \(did you mean "small"\?\)/.test(l)),
    typo.join('\n'),
  );
  const self = problems(model('a', '    fallback: a\n'), ['a']);
  assert.ok(
    self.some((l) => /models\.yaml:\d+:\d+: model "a" falls back to itself/.test(l)),
    self.join('\n'),
  );
  const cold = problems(model('a', '    fallback: huge\n') + '  - id: huge\n    cold: { load_hook: "http://127.0.0.1:1/load" }\n', ['a']);
  assert.ok(
    cold.some((l) => /models\.yaml:\d+:\d+: model "a" falls back to "huge", which is cold/.test(l)),
    cold.join('\n'),
  );
  // A chain without a loop is fine.
  assert.ok(
    load({
      'models.yaml': `kind: models\nmodels:\n${model('a', '    fallback: b\n')}${model('b')}`,
      'pools.yaml': `kind: pools\npools:\n${pool('a')}${pool('b')}`,
      'tenants.yaml': 'kind: tenants\nanonymous: t\ntenants:\n  - { id: t, tier: free }\n',
    }).snapshot,
  );
});
