// Where a long message is remembered (chat-estimate.ts, code.ts): a set of
// two entries (or more), named from its length and three of its characters, no pass
// over the text. The set only spreads messages; whether a remembered one is
// the same message is decided by comparing the two with ===. Two entries a
// set: a message takes the one its set used less lately, so two recurring
// messages that share a set both stay (one entry a set, 2 of bench:proxy's
// 16 documents at 16 KB took each other's and were read again every time).
// The long code scans' sets have four: 16 documents in 32 sets of two often
// left three in one set, which then missed in turn.

/** A slot in [0, 256) from the first `chars` characters of `text` (`chars` ≥ 1). */
export function messageSlot(text: string, chars = text.length): number {
  let h = Math.imul(chars ^ (text.charCodeAt(0) << 16), 0x9e3779b1);
  h = Math.imul(h ^ text.charCodeAt(chars >> 1) ^ (text.charCodeAt(chars - 1) << 16), 0x85ebca6b);
  return (h ^ (h >>> 15)) >>> 24;
}

/** Messages (or their first characters) remembered with a number each, in sets of a few entries. */
export class MessageSlots {
  /** Each entry's number, read and written by the caller at the entry `find` or `take` gives. */
  readonly values: Float64Array;
  readonly #texts: (string | undefined)[];
  /** Per entry, when it was found or taken last (a count of finds and takes). */
  readonly #used: Float64Array;
  #clock = 0;
  readonly #ways: number;
  readonly #setMask: number;

  /** `entries` and `ways` (entries a set): powers of two, `entries` up to 256 × `ways`. */
  constructor(entries: number, ways = 2) {
    this.values = new Float64Array(entries);
    this.#texts = new Array<string | undefined>(entries).fill(undefined);
    this.#used = new Float64Array(entries);
    this.#ways = ways;
    this.#setMask = entries / ways - 1;
  }

  /** The entry remembering the first `chars` characters of `text`, or -1. */
  find(text: string, chars = text.length): number {
    const first = (messageSlot(text, chars) & this.#setMask) * this.#ways;
    let key: string | undefined;
    for (let entry = first; entry < first + this.#ways; entry++) {
      const kept = this.#texts[entry];
      if (kept === undefined || kept.length !== chars) continue;
      // A prefix is compared as a substring (a view, no copy): === compares natively.
      key ??= chars === text.length ? text : text.substring(0, chars);
      if (kept === key) {
        this.#used[entry] = ++this.#clock;
        return entry;
      }
    }
    return -1;
  }

  /** The entry the first `chars` characters of `text` now take: their set's one used least lately. */
  take(text: string, chars = text.length): number {
    const first = (messageSlot(text, chars) & this.#setMask) * this.#ways;
    let taken = first;
    for (let entry = first + 1; entry < first + this.#ways; entry++) if (this.#used[entry] < this.#used[taken]) taken = entry;
    this.#used[taken] = ++this.#clock;
    // A substring is a view that keeps the whole text alive: a prefix is kept as a flat copy (flattening the pair copies it).
    this.#texts[taken] = chars === text.length ? text : ` ${text.substring(0, chars)}`.slice(1);
    return taken;
  }
}
