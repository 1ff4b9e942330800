// The router's block keys against the engine's, on bench:fleet-sockets' own
// multi-turn conversations (sim/workload/cache-pressure.ts: a ~3k-token
// document as the system prompt, 2–4 turns, the engine's answers in the
// history). The engine is the emulator, as a vLLM: it renders the chat
// template itself, caches 16-token blocks of prompt and answer, hashes them
// from its own random seed and publishes BlockStored over ZeroMQ. The router
// side is the tokenizer worker (ids and block names, incremental rendering
// of the next turns) and the KV index fed from those events. Before each
// turn the router predicts, from its keys alone, how many prompt tokens the
// engine will serve from cache; the engine's usage must say exactly that,
// and from the second turn on it covers the whole earlier prompt.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import OpenAI from 'openai';
import { KvIndex } from '../../core/fleet/kv-index.ts';
import { TokenBlockKeys } from '../../core/fleet/kv-keys.ts';
import { KvEventFeed } from '../../core/fleet/kv-subscriber.ts';
import { TokenizerService } from '../../core/tokens/service.ts';
import { PROFILES } from '../../sim/engine/profiles.ts';
import { type Emulator, startEmulator } from '../../sim/emulator/server.ts';
import { type ConversationMessage, cachePressureWorkload, turnMessages } from '../../sim/workload/cache-pressure.ts';
import { SyntheticSource } from '../../sim/workload/synthetic.ts';
import type { SimRequestSpec } from '../../sim/workload/types.ts';
import { LLAMA } from '../helpers/kv-event-router.ts';
import { until } from '../helpers/router.ts';

const service = new TokenizerService({ blockSizes: [16] });
const index = new KvIndex({ now: Date.now });
const feed = new KvEventFeed(index, { info() {}, warn() {} });
let emulator: Emulator | undefined;
after(async () => {
  await feed.close();
  await emulator?.close();
  await service.close();
});

/** The router's ids for a chat, as the request path counts them (no wait limit here). */
async function routerIds(messages: readonly ConversationMessage[]): Promise<Uint32Array> {
  const outcome = await service.count(LLAMA, { kind: 'chat', chat: { messages, add_generation_prompt: true }, now: Date.now() }, Infinity);
  assert.ok(outcome.ok, `the router's tokenizer counts the chat (${!outcome.ok && outcome.reason})`);
  return outcome.ids[0];
}

test("the router's block keys for bench:fleet-sockets' conversations are the engine's: it predicts each turn's cached tokens exactly", {
  timeout: 240_000,
}, async () => {
  emulator = await startEmulator({
    profile: { ...PROFILES['llama-3.1-8b-h100'], name: 'keys-test' },
    speed: 20,
    servedModelName: 'llama',
    tokenizer: LLAMA,
    kvEvents: 'tcp://127.0.0.1:*',
  });
  index.track('e0');
  feed.sync([{ replica: 'e0', endpoint: emulator.kvEvents! }]);
  assert.equal(await feed.connected('e0'), true);
  const client = new OpenAI({ baseURL: `${emulator.url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120_000 });
  const engine = emulator.engine;

  // Three conversations over two documents: the third shares its document with an earlier one.
  const source = new SyntheticSource(cachePressureWorkload({ conversations: 3, rate: 1, thinkS: 0.5, documents: 2 }), 'keys', [{ weight: 1, model: 'llama' }]);
  const firsts: SimRequestSpec[] = [];
  // The source issues as many requests as the conversations' turns: three first turns, then their follow-ups.
  for (let i = 0; i < 3; i++) firsts.push(source.next()!);

  let laterTurns = 0;
  for (const first of firsts) {
    const messages: ConversationMessage[] = [];
    let previous: SimRequestSpec | undefined;
    let previousPrompt = 0;
    let request: SimRequestSpec | undefined = first;
    while (request !== undefined) {
      messages.push(...turnMessages(request, previous));
      const ids = await routerIds(messages);
      // The router's prediction from its own keys: the leading blocks the index holds, as vLLM caps a hit (one token is always computed).
      const keys = new TokenBlockKeys(ids, 16, undefined, 1e9);
      assert.equal(keys.namedAhead, keys.length, 'the worker named every block');
      const predicted = Math.min(index.cachedTokens('e0', ids), Math.floor((ids.length - 1) / 16) * 16);
      const answer: OpenAI.ChatCompletion = await client.chat.completions.create({ model: 'llama', messages, max_tokens: request.outputTokens });
      const usage = answer.usage!;
      assert.equal(usage.prompt_tokens, ids.length, `turn ${request.turn}: the router counts the prompt as the engine does`);
      assert.equal(
        usage.prompt_tokens_details?.cached_tokens,
        predicted,
        `turn ${request.turn}: the engine served from cache what the router's keys predicted`,
      );
      if (request.turn > 1) {
        laterTurns++;
        assert.ok(
          predicted >= Math.floor(previousPrompt / 16) * 16,
          `turn ${request.turn}: the earlier turn's prompt is matched (${predicted} of ${ids.length})`,
        );
      }
      messages.push({ role: 'assistant', content: answer.choices[0].message.content ?? '' });
      previousPrompt = ids.length;
      previous = request;
      request = source.followUp(request, 0);
      // Every block the engine holds has come through the feed before the next turn is predicted.
      await until(() => index.blockCount('e0') === engine.cachedBlockIds().length, 30_000, "the index to hold the engine's blocks");
    }
  }
  assert.ok(laterTurns >= 3, `${laterTurns} later turns`);
  assert.equal(index.counters.unknownParent, 0);
  assert.equal(index.counters.invalidEvents, 0);
});
