// The warm hint's answers (core/tokens/warm-hint.ts) are those of its first
// form, kept here as the reference: each message fingerprinted as a string
// and hashed, the chains in a Map that a remembering deletes and sets again
// (the least recently remembered dropped past 8,192). Over a long random
// run, chains remembered again, dropped and asked for again, every answer is
// the same.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hashString, mixHashes } from '../../sdk/hashing.ts';
import type { CountJob } from '../../core/tokens/counter.ts';
import { WarmHint } from '../../core/tokens/warm-hint.ts';

class ReferenceHint {
  readonly #chains = new Map<number, true>();
  worthWaiting(job: CountJob, waitChars: number): boolean {
    if (job.kind !== 'chat') return true;
    const messages = job.chat.messages;
    const fingerprint = (message: unknown) => {
      const m = message as { role?: unknown; content?: unknown };
      const content = typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? null).slice(0, 4096);
      return hashString(`${String(m.role)}\u0000${content.length}\u0000${content.slice(0, 24)}\u0000${content.slice(-24)}`);
    };
    const chars = (message: unknown) => {
      const content = (message as { content?: unknown }).content;
      if (typeof content === 'string') return content.length;
      if (Array.isArray(content)) return content.reduce((n: number, p: { text?: unknown }) => n + (typeof p?.text === 'string' ? p.text.length : 0), 0);
      return 0;
    };
    const chain: number[] = [];
    let h = 0x2545f491;
    for (const m of messages) chain.push((h = mixHashes(h, fingerprint(m))));
    let newChars = 0;
    let k = messages.length - 1;
    for (; k >= 0 && newChars <= waitChars; k--) {
      if (this.#chains.has(chain[k])) break;
      newChars += chars(messages[k]);
    }
    for (let i = 0; i < messages.length; i++) {
      if (i !== messages.length - 1 && chars(messages[i]) < 2048) continue;
      this.#chains.delete(chain[i]);
      this.#chains.set(chain[i], true);
      if (this.#chains.size > 8192) this.#chains.delete(this.#chains.keys().next().value!);
    }
    return newChars <= waitChars;
  }
}

test('the warm hint answers as its first form did, over 60,000 jobs that remember, drop and find chains again', () => {
  let seed = 22;
  const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const documents = Array.from({ length: 40 }, (_, i) => `Document ${i}: ` + 'the replica keeps the prefix. '.repeat(80 + i * 7));
  // Conversations, each a list of turns; a job is one of them at some turn, often the next one, now and then an old one.
  const conversations: { role: string; content: unknown }[][] = [];
  const hint = new WarmHint();
  const reference = new ReferenceHint();
  let waited = 0;
  for (let n = 0; n < 60_000; n++) {
    let c: { role: string; content: unknown }[];
    if (conversations.length < 20 || rand() < 0.2) {
      const system = rand() < 0.5 ? documents[Math.floor(rand() * documents.length)] : `You are assistant ${Math.floor(rand() * 50)}.`;
      c = [{ role: 'system', content: system }];
      conversations.push(c);
      if (conversations.length > 4000) conversations.splice(Math.floor(rand() * conversations.length), 1);
    } else c = conversations[Math.floor(rand() * conversations.length)];
    const long = rand() < 0.05;
    const content =
      rand() < 0.1
        ? [{ type: 'text', text: `part ${n}` }]
        : `${long ? 'x'.repeat(3000 + Math.floor(rand() * 20_000)) : ''}question ${n} ${Math.floor(rand() * 9)}`;
    c.push({ role: 'user', content });
    const job: CountJob = { kind: 'chat', chat: { messages: [...c] }, now: 0 };
    const waitChars = rand() < 0.5 ? 10_000 : 256 + Math.floor(rand() * 20_000);
    const expected = reference.worthWaiting(job, waitChars);
    assert.equal(hint.worthWaiting(job, waitChars), expected, `job ${n}`);
    if (expected) waited++;
    c.push({ role: 'assistant', content: `answer ${n}` });
  }
  assert.ok(waited > 1000 && waited < 59_000, `${waited} of 60,000 worth waiting`);
  assert.ok(hint.worthWaiting({ kind: 'texts', texts: ['a'] }, 0));
});
