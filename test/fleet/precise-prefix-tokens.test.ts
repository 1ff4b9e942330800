// precise-prefix against engines that behave as vLLM: the real router, with
// the model's real tokenizer (Llama 3.1's vocabulary from a registry
// package), in front of two emulated engines that load the same folder,
// render the chat template, cache 16-token blocks and publish vLLM 0.26's
// events with hashes from their own random seeds. The router matches them by
// token content only: a conversation's second turn goes where its first was
// cached, and so does a new conversation sharing the system prompt.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { until } from '../helpers/router.ts';
import { askChat, type ChatTurn, type KvEventRouter, LLAMA, startKvEventRouter } from '../helpers/kv-event-router.ts';

let kv: KvEventRouter | undefined;
after(() => kv?.close());

test('a second turn goes where the first was cached, matched by token content against vLLM-like engines', { timeout: 120_000 }, async () => {
  kv = await startKvEventRouter({ tokenizer: LLAMA, settings: 'tokenize_wait_ms: 1000\n' });
  const { t, index } = kv;
  await new Promise((resolve) => setTimeout(resolve, 200));

  const system = { role: 'system' as const, content: 'You answer questions about freight routing, briefly and precisely. '.repeat(4) };
  const ask = (messages: ChatTurn[], conversation: string) => askChat(t, messages, conversation);

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
