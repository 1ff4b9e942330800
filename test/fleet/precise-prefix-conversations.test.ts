// precise-prefix on multi-turn conversations, end to end: the real router
// with Llama 3.1's tokenizer in front of two emulated engines that render the
// chat template themselves, cache prompt and answer blocks and publish vLLM
// 0.26's events over ZeroMQ from their own random seeds. Each conversation
// has a system prompt, 2–4 turns and the engine's earlier answers in its
// history (bench:fleet-sockets' shape, shorter to fit the test engines): from
// the second turn on, precise-prefix decides, on the replica that served the
// earlier turns, matching at least the whole earlier prompt.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { TokenizerService } from '../../core/tokens/service.ts';
import { conversationWords } from '../../sim/workload/cache-pressure.ts';
import { askChat, type ChatTurn, type KvEventRouter, LLAMA, startKvEventRouter } from '../helpers/kv-event-router.ts';
import { until } from '../helpers/router.ts';

let kv: KvEventRouter | undefined;
after(() => kv?.close());

test('from the second turn on, precise-prefix matches the blocks the engine published for the earlier turns', { timeout: 180_000 }, async () => {
  kv = await startKvEventRouter({ tokenizer: LLAMA, settings: 'tokenize_wait_ms: 1000\n' });
  const { t, index } = kv;

  // The router's tokenizer loads in the background (the first requests are estimated): wait until it counts.
  await until(
    async () => {
      await askChat(t, [{ role: 'user', content: 'warm up' }], 'warm');
      return /source="tokenizer"/.test(await (await fetch(`${t.adminUrl}/metrics`)).text());
    },
    90_000,
    'the router’s tokenizer to count',
  );

  let laterTurns = 0;
  for (const [c, turns] of [2, 3, 4].entries()) {
    const conversation = `conv-${c}`;
    const messages: ChatTurn[] = [{ role: 'system', content: conversationWords(`doc:${c}`, 150) }];
    let replica: string | undefined;
    let previousPrompt = 0;
    for (let turn = 1; turn <= turns; turn++) {
      messages.push({ role: 'user', content: conversationWords(`q:${c}:${turn}`, 12) });
      const { data, response } = await t.client.chat.completions
        .create({ model: 'tiny', messages, max_tokens: 40 }, { headers: { 'x-conversation-id': conversation } })
        .withResponse();
      const served = response.headers.get('x-switchyard-replica')!;
      const reason = response.headers.get('x-switchyard-reason') ?? '';
      const promptTokens = data.usage!.prompt_tokens;
      if (turn > 1) {
        laterTurns++;
        const held = /^precise-prefix: holds (\d+) of (\d+) prompt tokens \(KV events\)$/.exec(reason);
        assert.ok(held, `turn ${turn} of ${conversation}: precise-prefix decides by the engine's events (${reason})`);
        assert.equal(served, replica, `turn ${turn} of ${conversation} stays where its earlier turns are cached`);
        assert.equal(Number(held[2]), promptTokens, "the router's count is the engine's");
        assert.ok(
          Number(held[1]) >= Math.floor(previousPrompt / 16) * 16,
          `turn ${turn}: the earlier prompt is matched (${reason}, earlier ${previousPrompt})`,
        );
      }
      replica = served;
      previousPrompt = promptTokens;
      messages.push({ role: 'assistant', content: data.choices[0].message.content ?? '' });
      // The engine's events for this turn reach the index before the next turn asks (they travel over a socket).
      if (turn < turns) {
        const next = [...messages, { role: 'user', content: conversationWords(`q:${c}:${turn + 1}`, 12) }];
        const counted = await TokenizerService.shared().count(LLAMA, { kind: 'chat', chat: { messages: next }, now: Date.now() }, Infinity);
        assert.ok(counted.ok);
        await until(() => index.cachedTokens(served, counted.ids[0]) >= Math.floor(promptTokens / 16) * 16, 30_000, `turn ${turn}'s blocks in the index`);
      }
    }
  }
  assert.equal(laterTurns, 6);
  const page = await (await fetch(`${t.adminUrl}/metrics`)).text();
  assert.ok(Number(page.match(/^switchyard_kv_lookups_total\{result="matched"\} (\d+)$/m)?.[1]) >= laterTurns, page);
  assert.equal(index.counters.unknownParent, 0);
  assert.equal(index.counters.malformed, 0);
});
