// Which long chats the tokenizer worker may already hold (docs/tokens.md,
// "Speed"). A chat too long to encode within a request's wait can only be
// counted in time when the worker has its earlier messages cached; a cold
// one would make the request wait for an answer that is the estimate anyway.
// So the router's thread keeps, per chat it posted, a cheap fingerprint of
// its message chain, and waits for a long chat only when all but its last
// few thousand characters were posted before. A wrong hint costs latency or
// one estimated count, never a wrong count: the worker's answer decides.
import { hashRange, hashString, mixHashes } from '../../sdk/hashing.ts';
import type { CountJob } from './counter.ts';

/** Chains remembered, at most (least recently posted dropped first). */
const MAX_CHAINS = 8_192;
/** A message this long is worth remembering the chain up to, not only the chain of the whole chat: other conversations start with it. */
const LONG_MESSAGE_CHARS = 2_048;

/** A message in O(1): role, length and both ends of its text, each hashed where it is (no string is built per message per turn). */
function messageFingerprint(message: unknown): number {
  const m = message as { role?: unknown; content?: unknown };
  const content = typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? null).slice(0, 4096);
  const n = content.length;
  const role = hashString(typeof m.role === 'string' ? m.role : String(m.role), n);
  return mixHashes(mixHashes(role, hashRange(content, 0, Math.min(24, n))), hashRange(content, Math.max(0, n - 24), n));
}

function contentChars(message: unknown): number {
  const content = (message as { content?: unknown }).content;
  if (typeof content === 'string') return content.length;
  if (Array.isArray(content)) return content.reduce((n: number, p: { text?: unknown }) => n + (typeof p?.text === 'string' ? p.text.length : 0), 0);
  return 0;
}

export class WarmHint {
  /** Each remembered chain, with the stamp of its latest remembering. */
  readonly #chains = new Map<number, number>();
  /**
   * Chains in the order they were remembered, from #head on, with their stamps: an entry whose stamp is no longer its
   * chain's was remembered again later and is skipped. Dropping the least recently remembered chain so costs O(1),
   * where deleting a Map's first key and setting it again (the order kept by the Map itself) left the deleted keys as
   * holes its iterator walked over on every eviction: ~60k instructions a job at 8,192 chains.
   */
  #order: number[] = [];
  #stamps: number[] = [];
  #head = 0;
  #stamp = 0;

  /**
   * Whether waiting for the worker can pay off: a text prompt, or a chat whose
   * messages after the longest posted-before chain hold at most `waitChars`.
   * Remembers this job's chain either way: the worker will hold it.
   */
  worthWaiting(job: CountJob, waitChars: number): boolean {
    if (job.kind !== 'chat') return true; // texts: the worker's segment cache answers for those
    const messages = job.chat.messages;
    const chain: number[] = [];
    let h = 0x2545f491;
    for (const m of messages) chain.push((h = mixHashes(h, messageFingerprint(m))));
    let newChars = 0;
    let k = messages.length - 1;
    // Walk back over the new messages until a chain posted before, or until too much is new.
    for (; k >= 0 && newChars <= waitChars; k--) {
      if (this.#chains.has(chain[k])) break;
      newChars += contentChars(messages[k]);
    }
    // The whole chain (its next turn starts with it), and each chain up to a long message: a new conversation over
    // the same document (a shared system prompt) finds it encoded, and is waited for.
    for (let i = 0; i < messages.length; i++) if (i === messages.length - 1 || contentChars(messages[i]) >= LONG_MESSAGE_CHARS) this.#remember(chain[i]);
    return newChars <= waitChars;
  }

  #remember(chain: number): void {
    const stamp = ++this.#stamp;
    this.#chains.set(chain, stamp);
    this.#order.push(chain);
    this.#stamps.push(stamp);
    if (this.#chains.size > MAX_CHAINS) {
      // The least recently remembered: the first entry still holding its chain's stamp.
      for (;;) {
        const at = this.#head++;
        if (this.#chains.get(this.#order[at]) === this.#stamps[at]) {
          this.#chains.delete(this.#order[at]);
          break;
        }
      }
    }
    if (this.#order.length - this.#head > 2 * MAX_CHAINS || this.#head > MAX_CHAINS) this.#compact();
  }

  /** Drops the skipped and passed entries: the order keeps at most twice as many as there are chains. */
  #compact(): void {
    const order: number[] = [];
    const stamps: number[] = [];
    for (let at = this.#head; at < this.#order.length; at++) {
      if (this.#chains.get(this.#order[at]) !== this.#stamps[at]) continue;
      order.push(this.#order[at]);
      stamps.push(this.#stamps[at]);
    }
    this.#order = order;
    this.#stamps = stamps;
    this.#head = 0;
  }
}
