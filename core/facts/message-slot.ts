// Where a long message is remembered (chat-estimate.ts, code.ts): a set of
// two entries, named from its length and three of its characters, no pass
// over the text. The set only spreads messages; whether a remembered one is
// the same message is decided by comparing the two with ===. Two entries a
// set: a message takes the one its set used less lately, so two recurring
// messages that share a set both stay (one entry a set, 2 of bench:proxy's
// 16 documents at 16 KB took each other's and were read again every time).

/** A slot in [0, 256) from the first `chars` characters of `text` (`chars` ≥ 1). */
export function messageSlot(text: string, chars = text.length): number {
  let h = Math.imul(chars ^ (text.charCodeAt(0) << 16), 0x9e3779b1);
  h = Math.imul(h ^ text.charCodeAt(chars >> 1) ^ (text.charCodeAt(chars - 1) << 16), 0x85ebca6b);
  return (h ^ (h >>> 15)) >>> 24;
}

/** Messages (or their first characters) remembered with a number each, two entries a set. */
export class MessageSlots {
  /** Each entry's number, read and written by the caller at the entry `find` or `take` gives. */
  readonly values: Float64Array;
  readonly #texts: (string | undefined)[];
  /** Per set, the entry (0 or 1) found or taken last. */
  readonly #recent: Uint8Array;
  readonly #setMask: number;

  /** `entries`: a power of two from 2 to 512. */
  constructor(entries: number) {
    this.values = new Float64Array(entries);
    this.#texts = new Array<string | undefined>(entries).fill(undefined);
    this.#recent = new Uint8Array(entries >> 1);
    this.#setMask = (entries >> 1) - 1;
  }

  /** The entry remembering the first `chars` characters of `text`, or -1. */
  find(text: string, chars = text.length): number {
    const set = messageSlot(text, chars) & this.#setMask;
    let key: string | undefined;
    for (let way = 0; way < 2; way++) {
      const kept = this.#texts[2 * set + way];
      if (kept === undefined || kept.length !== chars) continue;
      // A prefix is compared as a substring (a view, no copy): === compares natively.
      key ??= chars === text.length ? text : text.substring(0, chars);
      if (kept === key) {
        this.#recent[set] = way;
        return 2 * set + way;
      }
    }
    return -1;
  }

  /** The entry the first `chars` characters of `text` now take: their set's one used less lately. */
  take(text: string, chars = text.length): number {
    const set = messageSlot(text, chars) & this.#setMask;
    const way = this.#recent[set] ^ 1;
    this.#recent[set] = way;
    // A substring is a view that keeps the whole text alive: a prefix is kept as a flat copy (flattening the pair copies it).
    this.#texts[2 * set + way] = chars === text.length ? text : ` ${text.substring(0, chars)}`.slice(1);
    return 2 * set + way;
  }
}
