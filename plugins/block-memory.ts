// prefix-affinity's memory: which replicas (as small numbers) last served
// each prompt block, in least-recently-used order. It is touched for every
// block of every routed request (~100 a request), so it is kept in typed
// arrays rather than a Map of objects: an open-addressing table from block
// hash to entry, each entry's holders in a fixed slice of one array, and the
// LRU order as a doubly linked list through two more. Every operation costs
// O(1) (eviction O(1) per entry dropped); a full memory allocates nothing.

/** Holders kept per block, most recent last: past a few, a block tells routing nothing more. */
export const MAX_HOLDERS = 16;

const NONE = -1;
/** Entry slots allocated at first; the arrays double from there as the memory fills. */
const INITIAL_ENTRIES = 1024;

export class BlockMemory {
  /** Entries in use. */
  size = 0;
  /** Entry e's block hash. */
  private keys = new Int32Array(INITIAL_ENTRIES);
  /** LRU neighbours of entry e: prev toward the oldest (the head), next toward the newest. Free entries chain through `next`. */
  private prev = new Int32Array(INITIAL_ENTRIES);
  private next = new Int32Array(INITIAL_ENTRIES);
  /** Entry e's holders are holders[e * MAX_HOLDERS ..][0, counts[e]), oldest first. */
  private counts = new Uint8Array(INITIAL_ENTRIES);
  /** Replica numbers: the caller keeps them below 65,536. */
  private holders = new Uint16Array(INITIAL_ENTRIES * MAX_HOLDERS);
  /** Open addressing with linear probing: slot → entry + 1, 0 when empty. Never more than half full. */
  private table = new Int32Array(INITIAL_ENTRIES * 2);
  private mask = INITIAL_ENTRIES * 2 - 1;
  /** A slot is the top bits of the salted key times a Fibonacci constant: 32 − log2(table size). */
  private shift = 32 - Math.log2(INITIAL_ENTRIES * 2);
  private head = NONE;
  private tail = NONE;
  private freeHead = NONE;
  /** Entries ever used: those at and past it were never handed out. */
  private used = 0;

  /**
   * @param salt mixed into every slot's hash, so that a client who crafts
   *   prompts cannot line up block hashes in one cluster of the table.
   */
  constructor(private readonly salt: number) {}

  /** The holders of `entry` are `holderArray[entry * MAX_HOLDERS + k]` for k below `holderCount(entry)`. */
  get holderArray(): Uint16Array {
    return this.holders;
  }

  holderCount(entry: number): number {
    return this.counts[entry];
  }

  /** The entry of block `key`, or -1. */
  find(key: number): number {
    const table = this.table;
    const mask = this.mask;
    const keys = this.keys;
    for (let slot = this.home(key); ; slot = (slot + 1) & mask) {
      const e = table[slot] - 1;
      if (e === NONE) return NONE;
      if (keys[e] === key) return e;
    }
  }

  /** Records that `replica` served block `key` now: the block becomes the most recently used and `replica` its newest holder. */
  touch(key: number, replica: number): void {
    let e = this.find(key);
    if (e === NONE) {
      e = this.insert(key);
      this.counts[e] = 1;
      this.holders[e * MAX_HOLDERS] = replica;
      this.append(e);
      return;
    }
    if (this.tail !== e) {
      this.unlink(e);
      this.append(e);
    }
    this.remember(e, replica);
  }

  /** Drops the `count` least recently used entries. */
  evictOldest(count: number): void {
    for (let n = 0; n < count && this.head !== NONE; n++) {
      const e = this.head;
      this.unlink(e);
      this.removeFromTable(e);
      this.next[e] = this.freeHead;
      this.freeHead = e;
      this.size--;
    }
  }

  /** Moves `replica` to the newest end of the entry's holders, dropping the oldest past MAX_HOLDERS. */
  private remember(e: number, replica: number): void {
    const holders = this.holders;
    const base = e * MAX_HOLDERS;
    const count = this.counts[e];
    const last = base + count - 1;
    if (holders[last] === replica) return;
    let at = base;
    while (at < last && holders[at] !== replica) at++;
    if (at === last) {
      // Not a holder yet: append, or shift the oldest out when full.
      if (count < MAX_HOLDERS) {
        holders[base + count] = replica;
        this.counts[e] = count + 1;
        return;
      }
      at = base;
    }
    holders.copyWithin(at, at + 1, last + 1);
    holders[last] = replica;
  }

  private home(key: number): number {
    return Math.imul(key ^ this.salt, 0x9e3779b1) >>> this.shift;
  }

  private insert(key: number): number {
    if (this.freeHead === NONE && this.used === this.keys.length) this.grow();
    let e: number;
    if (this.freeHead !== NONE) {
      e = this.freeHead;
      this.freeHead = this.next[e];
    } else {
      e = this.used++;
    }
    this.keys[e] = key;
    this.place(e);
    this.size++;
    return e;
  }

  private place(e: number): void {
    const table = this.table;
    const mask = this.mask;
    let slot = this.home(this.keys[e]);
    while (table[slot] !== 0) slot = (slot + 1) & mask;
    table[slot] = e + 1;
  }

  /** Backward-shift deletion: the probe sequences of the entries after it stay unbroken, with no tombstones. */
  private removeFromTable(e: number): void {
    const table = this.table;
    const mask = this.mask;
    let hole = this.home(this.keys[e]);
    while (table[hole] !== e + 1) hole = (hole + 1) & mask;
    for (let slot = (hole + 1) & mask; table[slot] !== 0; slot = (slot + 1) & mask) {
      const home = this.home(this.keys[table[slot] - 1]);
      // The entry at `slot` may move back into the hole unless its home lies cyclically in (hole, slot].
      const stays = hole <= slot ? hole < home && home <= slot : hole < home || home <= slot;
      if (stays) continue;
      table[hole] = table[slot];
      hole = slot;
    }
    table[hole] = 0;
  }

  private grow(): void {
    const capacity = this.keys.length * 2;
    const widen = <T extends Int32Array | Uint8Array | Uint16Array>(from: T, length: number): T => {
      const to = new (from.constructor as new (n: number) => T)(length);
      to.set(from);
      return to;
    };
    this.keys = widen(this.keys, capacity);
    this.prev = widen(this.prev, capacity);
    this.next = widen(this.next, capacity);
    this.counts = widen(this.counts, capacity);
    this.holders = widen(this.holders, capacity * MAX_HOLDERS);
    this.table = new Int32Array(capacity * 2);
    this.mask = capacity * 2 - 1;
    this.shift = 32 - Math.log2(capacity * 2);
    // It grows only when no entry is free: every entry handed out is live.
    for (let e = 0; e < this.used; e++) this.place(e);
  }

  private append(e: number): void {
    this.prev[e] = this.tail;
    this.next[e] = NONE;
    if (this.tail === NONE) this.head = e;
    else this.next[this.tail] = e;
    this.tail = e;
  }

  private unlink(e: number): void {
    const p = this.prev[e];
    const n = this.next[e];
    if (p === NONE) this.head = n;
    else this.next[p] = n;
    if (n === NONE) this.tail = p;
    else this.prev[n] = p;
  }
}
