// precise-prefix end to end: the real router in front of emulated engines
// that publish KV events over ZeroMQ on loopback as vLLM 0.26 does (block
// hashes of their own, from a random seed), the router's feed and index
// wired as `serve` wires them. A router that does not know the prompt's token
// ids cannot match what the engines hold: the index fills, no lookup ever
// matches, the chain's next strategy decides, and /metrics says so loudly.
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, test } from 'node:test';
import { KvIndex } from '../../core/fleet/kv-index.ts';
import { KvEventFeed, kvEventSources } from '../../core/fleet/kv-subscriber.ts';
import { registerKvMetrics } from '../../core/observe/kv-metrics.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import { buildSnapshot } from '../../core/decide/load.ts';
import { fixedPolicy } from '../../core/serve/fixed-policy.ts';
import { OPEN_TENANTS, startTestRouter, TINY_MODELS, until } from '../helpers/router.ts';
import { builtinRegistry } from '../helpers/builtins.ts';

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const closers: (() => unknown)[] = [];
after(async () => {
  for (const close of closers.reverse()) await close();
});

test('without the prompt’s token ids the index fills but never matches, and the metric says so', async () => {
  const ports = [await freePort(), await freePort()];
  const pools = `kind: pools
pools:
  - name: general
    model: tiny
    version: v1
    limits: { max_model_len: 1024 }
    strategies: [precise-prefix, round-robin]
    replicas:
      - { id: r0, url: "emulate://tiny", kv_events: "tcp://127.0.0.1:${ports[0]}" }
      - { id: r1, url: "emulate://tiny", kv_events: "tcp://127.0.0.1:${ports[1]}" }
`;
  const index = new KvIndex({ now: Date.now });
  const loaded = buildSnapshot(
    policyInputsFromTexts(
      { 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': pools, 'settings.yaml': 'kind: settings\ndecision_headers: full\n' },
      { registry: builtinRegistry },
    ),
    { seed: 1, kvIndex: index },
  );
  assert.ok(loaded.snapshot, JSON.stringify(loaded.problems));
  const snapshot = loaded.snapshot;
  const t = await startTestRouter({}, { policy: fixedPolicy(snapshot) });
  closers.push(() => t.close());
  registerKvMetrics(t.router.metrics.registry, index);
  const feed = new KvEventFeed(index, { info() {}, warn() {} });
  closers.push(() => feed.close());
  feed.sync(kvEventSources(snapshot.replicas.values()));
  assert.equal(await feed.connected('r0'), true);
  assert.equal(await feed.connected('r1'), true);
  assert.deepEqual(index.tracked().sort(), ['r0', 'r1']);
  await new Promise((resolve) => setTimeout(resolve, 200));

  const system = { role: 'system' as const, content: 'You answer questions about freight routing, briefly. '.repeat(6) };
  const ask = async (messages: { role: 'system' | 'user' | 'assistant'; content: string }[], conversation: string) => {
    const { data, response } = await t.client.chat.completions
      .create({ model: 'tiny', messages, max_tokens: 40 }, { headers: { 'x-conversation-id': conversation } })
      .withResponse();
    return {
      text: data.choices[0].message.content ?? '',
      replica: response.headers.get('x-switchyard-replica')!,
      reason: response.headers.get('x-switchyard-reason') ?? '',
    };
  };

  const first = [system, { role: 'user' as const, content: 'Which yard takes the night train?' }];
  const one = await ask(first, 'c1');
  await until(() => index.blockCount(one.replica) > 0, 10_000, 'the first turn’s blocks to be reported');
  const two = await ask([...first, { role: 'assistant', content: one.text }, { role: 'user', content: 'And on Sundays?' }], 'c1');
  assert.doesNotMatch(two.reason, /KV events/, 'the engine’s blocks are named by token content the router cannot produce');
  assert.equal(index.counters.malformed, 0);

  const page = await (await fetch(`${t.adminUrl}/metrics`)).text();
  const value = (pattern: RegExp) => Number(page.match(pattern)?.[1]);
  assert.ok(value(/^switchyard_kv_index_blocks\{replica="r\d"\} (\d+)$/m) > 0 || /switchyard_kv_index_blocks\{replica="r\d"\} [1-9]/.test(page), page);
  assert.ok(value(/^switchyard_kv_lookups_total\{result="unmatched"\} (\d+)$/m) >= 1, page);
  assert.equal(value(/^switchyard_kv_lookups_total\{result="matched"\} (\d+)$/m), 0);
  assert.match(page, /^switchyard_kv_index_last_match_age_seconds \+Inf$/m);
});
