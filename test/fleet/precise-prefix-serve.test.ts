// precise-prefix end to end: the real router in front of emulated engines
// that publish KV events over ZeroMQ on loopback as vLLM 0.26 does (block
// hashes of their own, from a random seed), the router's feed and index
// wired as `serve` wires them. A router that does not know the prompt's token
// ids cannot match what the engines hold: the index fills, no lookup ever
// matches, the chain's next strategy decides, and /metrics says so loudly.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { until } from '../helpers/router.ts';
import { askChat, type ChatTurn, type KvEventRouter, startKvEventRouter } from '../helpers/kv-event-router.ts';

let kv: KvEventRouter | undefined;
after(() => kv?.close());

test('without the prompt’s token ids the index fills but never matches, and the metric says so', async () => {
  kv = await startKvEventRouter();
  const { t, index } = kv;
  assert.deepEqual(index.tracked().sort(), ['r0', 'r1']);
  await new Promise((resolve) => setTimeout(resolve, 200));

  const system = { role: 'system' as const, content: 'You answer questions about freight routing, briefly. '.repeat(6) };
  const ask = (messages: ChatTurn[], conversation: string) => askChat(t, messages, conversation);

  const first = [system, { role: 'user' as const, content: 'Which yard takes the night train?' }];
  const one = await ask(first, 'c1');
  await until(() => index.blockCount(one.replica) > 0, 10_000, 'the first turn’s blocks to be reported');
  const two = await ask([...first, { role: 'assistant', content: one.text }, { role: 'user', content: 'And on Sundays?' }], 'c1');
  assert.doesNotMatch(two.reason, /KV events/, 'the engine’s blocks are named by token content the router cannot produce');
  assert.equal(index.counters.malformed, 0);
  // The decision says why precise-prefix passed: the prompt's token ids were not known.
  const logged = (await (await fetch(`${t.adminUrl}/admin/decisions?limit=10`)).json()) as {
    decisions: { trace: { replica?: { alternatives?: { name?: string; note?: string }[] } } }[];
  };
  const notes = logged.decisions.flatMap((d) => d.trace.replica?.alternatives ?? []).filter((a) => a.name === 'precise-prefix');
  assert.ok(
    notes.some((a) => /passed: no replica holds .*its token ids are not known/.test(a.note ?? '')),
    JSON.stringify(notes),
  );

  const page = await (await fetch(`${t.adminUrl}/metrics`)).text();
  const value = (pattern: RegExp) => Number(page.match(pattern)?.[1]);
  assert.ok(value(/^switchyard_kv_index_blocks\{replica="r\d"\} (\d+)$/m) > 0 || /switchyard_kv_index_blocks\{replica="r\d"\} [1-9]/.test(page), page);
  assert.ok(value(/^switchyard_kv_lookups_total\{result="unmatched"\} (\d+)$/m) >= 1, page);
  assert.equal(value(/^switchyard_kv_lookups_total\{result="matched"\} (\d+)$/m), 0);
  assert.match(page, /^switchyard_kv_index_last_match_age_seconds \+Inf$/m);
});
