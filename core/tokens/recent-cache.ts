// A byte-bounded cache that drops entries not used lately first (the
// tokenizer worker's caches: segment ids, per-piece ids, kept renderings).
// A hit only marks its entry used: moving it to the back of the Map on
// every hit, as a plain LRU does, leaves a deleted slot per hit, and V8
// rebuilds a Map whose slots run out, so a large Map with a few hot keys
// (`\n\n`, `user`, `assistant` every turn) cost 3–10 µs per hit (from
// 0.1 µs) and grew with the Map. Eviction gives a used entry a second
// chance instead: it goes to the back once, unmarked, and is dropped the
// next time it comes round unused (the "clock" approximation of LRU).
// The hand is one iterator of the Map kept from one eviction to the next:
// a fresh iterator per eviction started at the Map's first slot and walked
// over every slot deleted since V8 last rebuilt the Map (a full cache
// deletes one or more per new entry: 8 % of a next turn's work).

/** One entry: its value, what it costs in bytes, whether it was used since eviction last passed it. */
export interface Slot<V> {
  readonly value: V;
  cost: number;
  used: boolean;
  /** False once evicted (or replaced): a resize then changes nothing. */
  live: boolean;
}

export class RecentCache<V, K extends string | number = string> {
  readonly #entries = new Map<K, Slot<V>>();
  #bytes = 0;
  /** Eviction's hand: every entry it passed was evicted or moved to the back, so its next is the oldest entry. */
  #hand?: MapIterator<[K, Slot<V>]>;

  constructor(readonly maxBytes: number) {}

  get bytes(): number {
    return this.#bytes;
  }

  get size(): number {
    return this.#entries.size;
  }

  has(key: K): boolean {
    return this.#entries.has(key);
  }

  get(key: K): V | undefined {
    const slot = this.#entries.get(key);
    if (slot === undefined) return undefined;
    slot.used = true;
    return slot.value;
  }

  /** The entry's slot (for resize), or undefined when it costs over a quarter of the bound: one huge entry must not flush everyone else's. */
  set(key: K, value: V, cost: number): Slot<V> | undefined {
    if (cost > this.maxBytes / 4) return undefined;
    const old = this.#entries.get(key);
    if (old !== undefined) {
      old.live = false;
      this.#bytes -= old.cost;
      this.#entries.delete(key);
    }
    // Unmarked: it goes in at the back, behind everything eviction passes first. Marked, every new entry would make
    // eviction sweep past it once more, and a sweeping hand goes round faster than a hot entry is used again.
    const slot: Slot<V> = { value, cost, used: false, live: true };
    this.#entries.set(key, slot);
    this.#bytes += cost;
    this.#trim();
    return slot;
  }

  /** A kept entry grew or shrank (a rendering that now holds its ids). */
  resize(slot: Slot<V>, cost: number): void {
    if (!slot.live) return;
    this.#bytes += cost - slot.cost;
    slot.cost = cost;
    this.#trim();
  }

  #trim(): void {
    // Oldest first; a used one goes to the back once, unmarked. Each entry moves at most once per call, so this ends.
    while (this.#bytes > this.maxBytes) {
      const entry = this.#next();
      if (entry === undefined) return;
      const [key, slot] = entry;
      this.#entries.delete(key);
      if (slot.used) {
        slot.used = false;
        this.#entries.set(key, slot);
      } else {
        slot.live = false;
        this.#bytes -= slot.cost;
      }
    }
  }

  /** The oldest entry, from the hand; past the Map's last entry, a new hand starts at its first (undefined: the Map is empty). */
  #next(): [K, Slot<V>] | undefined {
    let step = (this.#hand ??= this.#entries.entries()).next();
    if (step.done) {
      this.#hand = this.#entries.entries();
      step = this.#hand.next();
    }
    return step.done ? undefined : step.value;
  }
}
