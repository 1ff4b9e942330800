// prefix-affinity's memory: which replicas (as small numbers) last served
// each prompt block, in least-recently-used order. It is touched for every
// block of every routed request (~100 a request), and at its default size
// (200,000 blocks) it is far larger than the CPU's caches, so what costs is
// memory reads, not instructions. Hence:
// - an open-addressing table whose slots hold key and entry side by side
//   (one read finds a block);
// - one 16-byte record per entry (LRU neighbours, key, holder count and
//   newest holder) and, apart, its older holders: eviction walks the records
//   only, four to a cache line, and a block with one holder (most: a
//   prompt's own blocks), or touched again by its newest, is read and
//   written through its record alone;
// - freed entries reused oldest first, so a prompt's new blocks get
//   neighbouring records and are evicted, later, in memory order;
// - the LRU order as a linked list through the records, which doubles as a
//   guess: a prompt's blocks are touched in order, so the block after block i
//   is usually the one touched after it last time (its LRU successor), found
//   without probing the table; such a run of neighbours moves to the tail in
//   one splice (touchAll).
// Every operation is O(1) (eviction O(1) per entry dropped); a full memory
// allocates nothing.

/** Holders kept per block, most recent last: past a few, a block tells routing nothing more. */
export const MAX_HOLDERS = 16;

const NONE = -1;
/** Entries whose table slots eviction reads ahead, at a time (a power of two). */
const PREFETCH = 32;
/** Entries allocated at first; the arrays double from there as the memory fills. */
const INITIAL_ENTRIES = 1024;
// A record is 4 int32 (16 bytes): prev, next, key, and the holders: their count in the high
// 16 bits, the newest in the low 16. Entry e's older holders (count - 1 of them) are
// holders[e * MAX_HOLDERS ...] (32 bytes), read and written only when it has more than one.
const RECORD_INTS = 4;
const PREV = 0;
const NEXT = 1;
const KEY = 2;
const HOLDERS = 3;
const NEWEST_MASK = 0xffff;
const COUNT_SHIFT = 16;

export class BlockMemory {
  /** Entries in use. */
  size = 0;
  private records = new Int32Array(INITIAL_ENTRIES * RECORD_INTS);
  /** Older holders of entry e are holders[e * MAX_HOLDERS + k] for k below its count - 1, oldest first. */
  private holders = new Uint16Array(INITIAL_ENTRIES * MAX_HOLDERS);
  private capacity = INITIAL_ENTRIES;
  /** Open addressing with linear probing: slot s is table[2s] = key, table[2s + 1] = entry + 1 (0: empty). Never more than half full. */
  private table = new Int32Array(INITIAL_ENTRIES * 4);
  private mask = INITIAL_ENTRIES * 2 - 1;
  /** A slot is the top bits of the salted key times a Fibonacci constant: 32 − log2(slots). */
  private shift = 32 - Math.log2(INITIAL_ENTRIES * 2);
  /** Oldest and newest entries. */
  private head = NONE;
  private tail = NONE;
  /**
   * Free entries, chained through NEXT, reused in the order they were freed:
   * eviction frees them oldest first, so blocks inserted together (a
   * prompt's new blocks) land in neighbouring records, and the next
   * eviction reads them in memory order instead of jumping about.
   */
  private freeHead = NONE;
  private freeTail = NONE;
  /** Entries ever handed out: those at and past it were never used. */
  private used = 0;
  /** Where prefetch() leaves what it read, so that the reads are not optimized away. */
  sink = 0;

  /**
   * @param salt mixed into every slot's hash, so that a client who crafts
   *   prompts cannot line up block hashes in one cluster of the table.
   */
  constructor(private readonly salt: number) {}

  /**
   * Entry e's holders, oldest first, are `holderArray[holdersStart(e) + k]`
   * for k below `holderCount(e) - 1`, then `newestHolder(e)`.
   */
  get holderArray(): Uint16Array {
    return this.holders;
  }

  holdersStart(entry: number): number {
    return entry * MAX_HOLDERS;
  }

  holderCount(entry: number): number {
    return this.records[entry * RECORD_INTS + HOLDERS] >>> COUNT_SHIFT;
  }

  newestHolder(entry: number): number {
    return this.records[entry * RECORD_INTS + HOLDERS] & NEWEST_MASK;
  }

  /** Entry e's holders, oldest first (a new array: for tests and tools, not the hot path). */
  holdersOf(entry: number): number[] {
    const start = this.holdersStart(entry);
    const older = Array.from(this.holders.subarray(start, start + this.holderCount(entry) - 1));
    return [...older, this.newestHolder(entry)];
  }

  /** The entry of block `key`, or -1. */
  find(key: number): number {
    const table = this.table;
    const mask = this.mask;
    for (let slot = this.home(key); ; slot = (slot + 1) & mask) {
      const e = table[2 * slot + 1] - 1;
      if (e === NONE || table[2 * slot] === key) return e;
    }
  }

  /**
   * The entry of block `key`, which usually follows `previous` (the entry of
   * the block before it in the prompt, or -1): its LRU successor is tried first.
   */
  findAfter(previous: number, key: number): number {
    if (previous !== NONE) {
      const guess = this.records[previous * RECORD_INTS + NEXT];
      if (guess !== NONE && this.records[guess * RECORD_INTS + KEY] === key) return guess;
    }
    return this.find(key);
  }

  /**
   * Records that `replica` served the blocks `keys` (a prompt's, in order)
   * now: they become the most recently used, in that order, and `replica`
   * their newest holder. A prompt's blocks were usually linked in the same
   * order last time, so the entries touched one after another that are
   * still neighbours in the list (each the LRU successor of the one before,
   * found without probing the table) form a run, moved to the tail in one
   * splice when it ends; a run already at the tail does not move at all.
   * The order is the same as moving each block to the tail in turn.
   */
  touchAll(keys: readonly number[], replica: number): void {
    // The run: entries first..last, linked in this order, not yet moved.
    let first = NONE;
    let last = NONE;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i] | 0;
      // insert() may grow the arrays: read this.records afresh.
      const records = this.records;
      if (last !== NONE) {
        const next = records[last * RECORD_INTS + NEXT];
        if (next !== NONE && records[next * RECORD_INTS + KEY] === key) {
          last = next;
          this.remember(next, replica);
          continue;
        }
        this.moveToTail(first, last);
      }
      const e = this.find(key);
      if (e === NONE) {
        const added = this.insert(key);
        this.records[added * RECORD_INTS + HOLDERS] = (1 << COUNT_SHIFT) | replica;
        this.append(added);
        first = last = NONE;
        continue;
      }
      first = last = e;
      this.remember(e, replica);
    }
    if (last !== NONE) this.moveToTail(first, last);
  }

  /** Drops the `count` least recently used entries. */
  evictOldest(count: number): void {
    const records = this.records;
    const first = this.head;
    let e = first;
    let last = NONE;
    let n = 0;
    for (; n < count && e !== NONE; n++) {
      if ((n & (PREFETCH - 1)) === 0) this.prefetchOldest(e, count - n < PREFETCH ? count - n : PREFETCH);
      this.removeFromTable(records[e * RECORD_INTS + KEY]);
      last = e;
      e = records[e * RECORD_INTS + NEXT];
    }
    if (last === NONE) return;
    this.size -= n;
    // The dropped entries, first..last, are still chained through NEXT oldest first:
    // they join the free list as they are, and the list is cut once, not per entry.
    records[last * RECORD_INTS + NEXT] = NONE;
    if (this.freeTail === NONE) this.freeHead = first;
    else records[this.freeTail * RECORD_INTS + NEXT] = first;
    this.freeTail = last;
    this.head = e;
    if (e === NONE) this.tail = NONE;
    else records[e * RECORD_INTS + PREV] = NONE;
  }

  /**
   * Reads the table slots of `keys` ahead of looking them up. The memory is
   * far larger than the CPU's caches, so each lookup of a block not seen
   * lately waits for main memory; these reads do not depend on each other,
   * and the CPU overlaps their waits. Changes nothing. `from`: the keys
   * before it were just read (a pick found them).
   */
  prefetch(keys: readonly number[], from = 0): void {
    const table = this.table;
    const records = this.records;
    let sink = 0;
    // The entry of the block before: its LRU successor is likely the next block's (as in touchAll).
    let e = NONE;
    for (let i = from; i < keys.length; i++) {
      const key = keys[i] | 0;
      if (e !== NONE) {
        const guess = records[e * RECORD_INTS + NEXT];
        if (guess !== NONE && records[guess * RECORD_INTS + KEY] === key) {
          e = guess;
          continue;
        }
      }
      const slot = this.home(key);
      // A block held: its record too (found at its home slot, as most are).
      e = table[2 * slot] === key ? table[2 * slot + 1] - 1 : NONE;
      if (e !== NONE) sink += records[e * RECORD_INTS + HOLDERS];
    }
    this.sink = sink;
  }

  /** The same for the table slots of `count` entries from `e` on, in LRU order (the next ones eviction removes). */
  private prefetchOldest(e: number, count: number): void {
    const records = this.records;
    const table = this.table;
    let sink = 0;
    for (let n = 0; n < count && e !== NONE; n++) {
      sink += table[2 * this.home(records[e * RECORD_INTS + KEY]) + 1];
      e = records[e * RECORD_INTS + NEXT];
    }
    this.sink = sink;
  }

  /** Moves `replica` to the newest end of the entry's holders, dropping the oldest past MAX_HOLDERS. */
  private remember(e: number, replica: number): void {
    const at = e * RECORD_INTS + HOLDERS;
    const packed = this.records[at];
    const newest = packed & NEWEST_MASK;
    if (newest === replica) return;
    const count = packed >>> COUNT_SHIFT;
    // The older holders: the previous newest joins their newest end.
    const holders = this.holders;
    const base = e * MAX_HOLDERS;
    const last = base + count - 1;
    if (count === MAX_HOLDERS) {
      // Full (a block every replica serves, in a large pool): one pass from the newest end, each older
      // holder moving one place toward the oldest, up to the replica's own place (it leaves the older
      // ones) or the oldest's (dropped); not a search and then a shift.
      let carried = newest;
      for (let k = last - 1; k >= base; k--) {
        const held = holders[k];
        holders[k] = carried;
        if (held === replica) break;
        carried = held;
      }
      this.records[at] = (count << COUNT_SHIFT) | replica;
      return;
    }
    let k = base;
    while (k < last && holders[k] !== replica) k++;
    if (k === last) {
      // Not a holder yet: one more.
      holders[last] = newest;
      this.records[at] = ((count + 1) << COUNT_SHIFT) | replica;
      return;
    }
    // A few slots at most: a loop costs less than copyWithin's call into the runtime.
    for (; k < last - 1; k++) holders[k] = holders[k + 1];
    holders[last - 1] = newest;
    this.records[at] = (count << COUNT_SHIFT) | replica;
  }

  private home(key: number): number {
    return Math.imul(key ^ this.salt, 0x9e3779b1) >>> this.shift;
  }

  private insert(key: number): number {
    if (this.freeHead === NONE && this.used === this.capacity) this.grow();
    let e: number;
    if (this.freeHead !== NONE) {
      e = this.freeHead;
      this.freeHead = this.records[e * RECORD_INTS + NEXT];
      if (this.freeHead === NONE) this.freeTail = NONE;
    } else {
      e = this.used++;
    }
    this.records[e * RECORD_INTS + KEY] = key;
    this.place(key, e);
    this.size++;
    return e;
  }

  private place(key: number, e: number): void {
    const table = this.table;
    const mask = this.mask;
    let slot = this.home(key);
    while (table[2 * slot + 1] !== 0) slot = (slot + 1) & mask;
    table[2 * slot] = key;
    table[2 * slot + 1] = e + 1;
  }

  /** Backward-shift deletion: the probe sequences of the entries after it stay unbroken, with no tombstones. */
  private removeFromTable(key: number): void {
    const table = this.table;
    const mask = this.mask;
    let hole = this.home(key);
    while (table[2 * hole] !== key || table[2 * hole + 1] === 0) hole = (hole + 1) & mask;
    for (let slot = (hole + 1) & mask; table[2 * slot + 1] !== 0; slot = (slot + 1) & mask) {
      const home = this.home(table[2 * slot]);
      // The entry at `slot` may move back into the hole unless its home lies cyclically in (hole, slot].
      const stays = hole <= slot ? hole < home && home <= slot : hole < home || home <= slot;
      if (stays) continue;
      table[2 * hole] = table[2 * slot];
      table[2 * hole + 1] = table[2 * slot + 1];
      hole = slot;
    }
    table[2 * hole] = 0;
    table[2 * hole + 1] = 0;
  }

  private grow(): void {
    this.capacity *= 2;
    const records = new Int32Array(this.capacity * RECORD_INTS);
    records.set(this.records);
    this.records = records;
    const holders = new Uint16Array(this.capacity * MAX_HOLDERS);
    holders.set(this.holders);
    this.holders = holders;
    const slots = this.capacity * 2;
    this.table = new Int32Array(slots * 2);
    this.mask = slots - 1;
    this.shift = 32 - Math.log2(slots);
    // It grows only when no entry is free: every entry handed out is live.
    for (let e = 0; e < this.used; e++) this.place(records[e * RECORD_INTS + KEY], e);
  }

  private append(e: number): void {
    const records = this.records;
    records[e * RECORD_INTS + PREV] = this.tail;
    records[e * RECORD_INTS + NEXT] = NONE;
    if (this.tail === NONE) this.head = e;
    else records[this.tail * RECORD_INTS + NEXT] = e;
    this.tail = e;
  }

  /** Moves the entries first..last (linked in this order) to the newest end in one splice. */
  private moveToTail(first: number, last: number): void {
    const tail = this.tail;
    if (last === tail) return;
    const records = this.records;
    const p = records[first * RECORD_INTS + PREV];
    // `last` is not the tail: it has a successor.
    const n = records[last * RECORD_INTS + NEXT];
    if (p === NONE) this.head = n;
    else records[p * RECORD_INTS + NEXT] = n;
    records[n * RECORD_INTS + PREV] = p;
    records[first * RECORD_INTS + PREV] = tail;
    records[tail * RECORD_INTS + NEXT] = first;
    records[last * RECORD_INTS + NEXT] = NONE;
    this.tail = last;
  }
}
