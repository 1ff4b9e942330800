// Load in tokens counts the uncached prompt only: the real router with the
// model's real tokenizer (Llama 3.1's vocabulary) before two emulated engines
// that cache 16-token blocks and publish vLLM 0.26's KV events. A
// conversation's second turn, sent where its first is cached, adds only the
// tokens that replica does not hold to its prefill in flight.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { json, until } from '../helpers/router.ts';
import { type KvEventRouter, LLAMA, startKvEventRouter } from '../helpers/kv-event-router.ts';

let kv: KvEventRouter | undefined;
after(() => kv?.close());

test('a second turn sent where its first is cached counts only its uncached prompt as prefill in flight', { timeout: 120_000 }, async () => {
  kv = await startKvEventRouter({ tokenizer: LLAMA });
  const { t, index } = kv;

  // What each request adds to its replica's prefill in flight, as the proxy counts it (the fleet's own method, observed and called through).
  const fleet = t.router.fleet;
  const added: { replica: string; tokens: number }[] = [];
  const startPrefill = fleet.startPrefill.bind(fleet);
  fleet.startPrefill = (id: string, tokens: number) => {
    added.push({ replica: id, tokens });
    return startPrefill(id, tokens);
  };

  const system = { role: 'system' as const, content: 'You answer questions about freight routing, briefly and precisely. '.repeat(4) };
  const ask = async (messages: { role: 'system' | 'user' | 'assistant'; content: string }[], conversation: string) => {
    const { data, response } = await t.client.chat.completions
      .create({ model: 'tiny', messages, max_tokens: 40 }, { headers: { 'x-conversation-id': conversation } })
      .withResponse();
    const decision = await json(await fetch(`${t.adminUrl}/admin/decisions/${response.headers.get('x-request-id')}`));
    return {
      text: data.choices[0].message.content ?? '',
      replica: response.headers.get('x-switchyard-replica')!,
      reason: response.headers.get('x-switchyard-reason') ?? '',
      decision,
      added: added.at(-1)!,
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

  // On a loaded machine a turn's token count may miss its 20 ms wait (docs/tokens.md) and precise-prefix then has no ids to match:
  // the same turn again finds its count ready.
  const secondTurn = [...first, { role: 'assistant' as const, content: one.text }, { role: 'user' as const, content: 'And on Sundays?' }];
  let two = await ask(secondTurn, 'c1');
  for (let tries = 1; tries < 5 && !/prompt tokens \(KV events\)/.test(two.reason); tries++) two = await ask(secondTurn, 'c1');
  // (A try that missed its count went elsewhere and cached the turn there: wherever the match is, it is what counts.)
  assert.match(two.reason, /prompt tokens \(KV events\)/, 'precise-prefix matched the turn by its token ids');
  const [, held, prompt] = two.reason.match(/holds (\d+) of (\d+) prompt tokens \(KV events\)/)!.map(Number);
  assert.ok(held >= 64, two.reason);
  assert.equal(two.added.replica, two.replica);
  assert.equal(two.added.tokens, prompt - held, `only the uncached ${prompt - held} of ${prompt} prompt tokens are prefill in flight`);

  // And once the first bytes came, nothing stays counted.
  await until(() => fleet.list().every((s) => (s.prefillTokens ?? 0) === 0), 10_000, 'prefill in flight back to 0');
});
