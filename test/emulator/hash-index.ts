// prefix hash → KV block id, as an open-addressing table over typed arrays.
// A Map with 32-bit unsigned keys (most of them beyond the small-integer
// range) was the simulator's hottest spot: every prompt block is inserted
// once and deleted on eviction. The table never holds more entries than
// there are KV blocks, so it is sized once and never grows.

const EMPTY = -1;

export class HashIndex {
  private readonly keys: Float64Array;
  private readonly values: Int32Array;
  private readonly mask: number;
  private count = 0;

  constructor(maxEntries: number) {
    let capacity = 16;
    while (capacity < maxEntries * 2) capacity *= 2;
    this.keys = new Float64Array(capacity);
    this.values = new Int32Array(capacity).fill(EMPTY);
    this.mask = capacity - 1;
  }

  get size(): number {
    return this.count;
  }

  /** The block holding `key`, or -1. */
  get(key: number): number {
    const keys = this.keys;
    const values = this.values;
    let i = slot(key) & this.mask;
    for (;;) {
      const value = values[i];
      if (value === EMPTY || keys[i] === key) return value;
      i = (i + 1) & this.mask;
    }
  }

  /** Adds `key` unless present; returns false when it was. */
  add(key: number, value: number): boolean {
    const keys = this.keys;
    const values = this.values;
    let i = slot(key) & this.mask;
    while (values[i] !== EMPTY) {
      if (keys[i] === key) return false;
      i = (i + 1) & this.mask;
    }
    keys[i] = key;
    values[i] = value;
    this.count++;
    return true;
  }

  /** Removes `key` if it maps to `value` (a block can have been re-cached elsewhere). */
  deleteIf(key: number, value: number): void {
    const keys = this.keys;
    const values = this.values;
    const mask = this.mask;
    let i = slot(key) & mask;
    for (;;) {
      const found = values[i];
      if (found === EMPTY) return;
      if (keys[i] === key) {
        if (found !== value) return;
        break;
      }
      i = (i + 1) & mask;
    }
    // Backward-shift deletion keeps every later entry of the probe run reachable without tombstones.
    let hole = i;
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      if (values[j] === EMPTY) break;
      const home = slot(keys[j]) & mask;
      // Move entry j into the hole unless its home lies cyclically in (hole, j].
      const stays = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (stays) continue;
      keys[hole] = keys[j];
      values[hole] = values[j];
      hole = j;
    }
    values[hole] = EMPTY;
    this.count--;
  }
}

/** Mixes any number (hashes are usually uint32, sometimes wider integers) into a 32-bit slot hash. */
function slot(key: number): number {
  const high = (key / 4294967296) | 0;
  let h = (key | 0) ^ Math.imul(high, 0x9e3779b1);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  return h ^ (h >>> 13);
}
