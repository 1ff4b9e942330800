// Load in tokens: the router counts, per replica, the prompt tokens it sent
// that have not reached their first byte (prefill in progress) and its open
// streams; /admin/state and the metrics show them; the load score may weigh
// them and the affinity strategies may release on them.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import type { Router } from '../../core/serve/server.ts';
import { loadScore } from '../../sdk/index.ts';
import sessionAffinity from '../../plugins/session-affinity.ts';
import { admitted, ManualFleet, policyFrom, route } from '../helpers/core.ts';
import { json, OPEN_TENANTS, until, startRouterOver } from '../helpers/router.ts';
import { UsageEngine } from '../helpers/usage-engine.ts';

const engine = new UsageEngine('t0');
let router: Router;

before(async () => {
  const url = await engine.start();
  const files = {
    'models.yaml': 'kind: models\nmodels:\n  - id: tiny\n    versions: [{ version: v1 }]\n',
    'pools.yaml': `kind: pools\npools:\n  - name: general\n    model: tiny\n    version: v1\n    token_load: { full_prefill_tokens: 10000 }\n    strategies: [least-load]\n    replicas:\n      - { id: t0, url: "${url}" }\n`,
    'tenants.yaml': OPEN_TENANTS,
  };
  router = await startRouterOver(files, 1);
  await until(() => router.fleet.list().every((s) => s.health === 'ready'), 10_000, 'engine ready');
});

after(async () => {
  await router.close(1000);
  await engine.stop();
});

async function replicaState(): Promise<{ prefillTokens: number; activeStreams: number; inFlight: number }> {
  const state = await json(await fetch(`${router.adminUrl}/admin/state`));
  return state.replicas.find((r: { id: string }) => r.id === 't0');
}

test('prefill tokens count until the first byte, streams until their end; /admin/state and /metrics show them', async () => {
  engine.firstTokenDelayMs = 400;
  engine.chunkEveryMs = 30;
  const client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'sk-test', maxRetries: 0, timeout: 10_000 });
  const prompt = 'word '.repeat(8000); // several thousand tokens, however estimated
  const stream = client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: prompt }], max_tokens: 20, stream: true });
  await until(async () => (await replicaState()).prefillTokens > 4000, 5000, 'prefill counted');
  const during = await replicaState();
  assert.equal(during.activeStreams, 1);
  const metrics = await (await fetch(`${router.adminUrl}/metrics`)).text();
  assert.match(metrics, new RegExp(`switchyard_replica_prefill_tokens\\{replica="t0",pool="tiny@v1/general"\\} ${during.prefillTokens}\n`));
  const chunks = await stream;
  const reader = chunks[Symbol.asyncIterator]();
  await reader.next(); // the first byte is out: prefill over, the stream still open
  await until(async () => (await replicaState()).prefillTokens === 0, 5000, 'prefill over at the first byte');
  assert.equal((await replicaState()).activeStreams, 1);
  while (!(await reader.next()).done);
  await until(async () => (await replicaState()).activeStreams === 0, 5000, 'stream closed');
  engine.firstTokenDelayMs = 0;
  engine.chunkEveryMs = 1;
});

test('the load score weighs tokenLoad when the pool says, and session affinity releases on it', () => {
  const snapshot = policyFrom({
    'models.yaml': 'kind: models\nmodels:\n  - id: m\n    versions: [{ version: v1 }]\n',
    'tenants.yaml': OPEN_TENANTS,
    'pools.yaml':
      'kind: pools\npools:\n  - name: general\n    model: m\n    version: v1\n    load_score: { token_load: 1 }\n    token_load: { full_prefill_tokens: 1000 }\n' +
      '    strategies: [least-load]\n    replicas:\n      - { id: a, url: "http://127.0.0.1:1" }\n      - { id: b, url: "http://127.0.0.1:2" }\n',
  });
  // Same scraped load; a has 900 prompt tokens in prefill: least-load picks b.
  const fleet = new ManualFleet()
    .set('a', { kvUsage: 0.1, queueDepth: 0, running: 1, inFlight: 1, prefillTokens: 900 })
    .set('b', { kvUsage: 0.1, queueDepth: 0, running: 1, inFlight: 1 });
  const d = route(snapshot, { model: 'm', key: 'sk-test' }, fleet);
  assert.ok(d.ok);
  assert.equal(admitted(d).value.replica, 'b');
  const signals = { kvUsage: 0.1, queueDepth: 0, running: 1, inFlight: 1, loadedAdapters: [], ageMs: 0, stale: false };
  const capacity = { maxLoras: 4, maxBatch: 256, maxQueue: 64 };
  const busy = { id: 'a', url: '', engine: 'vllm' as const, saturated: false, capacity, signals: { ...signals, tokenLoad: 0.9 } };
  assert.equal(loadScore(busy), loadScore({ ...busy, signals }), 'default weights leave the score as it was');
  assert.ok(
    loadScore(busy, { kvUsage: 0.6, queue: 0.3, running: 0.1, tokenLoad: 1 }) >
      loadScore({ ...busy, signals }, { kvUsage: 0.6, queue: 0.3, running: 0.1, tokenLoad: 1 }),
  );
  const strategy = sessionAffinity.create({ release_threshold: 0.85, token_release_threshold: 0.8, bounded_load: null });
  const request = {
    id: 'r',
    model: 'm',
    version: 'v1',
    pool: 'p',
    tenant: 't',
    conversationId: 'c',
    priority: 'interactive' as const,
    promptTokens: 10,
    maxTokens: 10,
    prefixHashes: [],
  };
  const result = strategy.pick(request, [busy]);
  assert.ok(result && 'pass' in result, 'released on the token valve');
  assert.match(result.reason, /prefill load 0\.90 >= 0\.8/);
  const calm = strategy.pick(request, [{ ...busy, signals: { ...signals, tokenLoad: 0.1 } }]);
  assert.ok(calm && 'replica' in calm);
});
