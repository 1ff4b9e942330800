// The tokenizer worker's byte-bounded caches (core/tokens/recent-cache.ts):
// bounded in bytes, entries in use survive a flood of one-off entries, and
// a hit does not churn the Map (hot keys stayed hot for 30,000 misses).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RecentCache } from '../../core/tokens/recent-cache.ts';

test('entries used between evictions stay; one-off entries go first; the bound holds', () => {
  const cache = new RecentCache<number>(100 * 100);
  let misses = 0;
  for (let i = 0; i < 30_000; i++) {
    const hot = `hot ${i % 16}`;
    if (cache.get(hot) === undefined) {
      misses++;
      cache.set(hot, i, 100);
    }
    cache.set(`once ${i}`, i, 100);
    assert.ok(cache.bytes <= cache.maxBytes);
  }
  assert.equal(misses, 16, 'each hot key encoded once');
  assert.equal(cache.size, 100);
});

test('an entry over a quarter of the bound is not kept; a resize counts; a replaced or evicted slot resizes nothing', () => {
  const cache = new RecentCache<string>(1000);
  assert.equal(cache.set('huge', 'x', 251), undefined);
  assert.equal(cache.has('huge'), false);
  const a = cache.set('a', 'a', 100)!;
  cache.resize(a, 300);
  assert.equal(cache.bytes, 300);
  cache.set('a', 'a2', 50);
  cache.resize(a, 900); // the old slot: nothing changes
  assert.equal(cache.bytes, 50);
  for (let i = 0; i < 30; i++) cache.set(`k${i}`, 'v', 200);
  assert.ok(cache.bytes <= 1000, `${cache.bytes}`);
});

/** The cache as it was before eviction kept its own order: the Map's order, walked from its first slot on every trim. */
class MapOrderedCache<V> {
  readonly entries = new Map<string, { value: V; cost: number; used: boolean; live: boolean }>();
  bytes = 0;
  constructor(readonly maxBytes: number) {}
  get(key: string): V | undefined {
    const slot = this.entries.get(key);
    if (slot === undefined) return undefined;
    slot.used = true;
    return slot.value;
  }
  set(key: string, value: V, cost: number) {
    if (cost > this.maxBytes / 4) return undefined;
    const old = this.entries.get(key);
    if (old !== undefined) {
      old.live = false;
      this.bytes -= old.cost;
      this.entries.delete(key);
    }
    const slot = { value, cost, used: false, live: true };
    this.entries.set(key, slot);
    this.bytes += cost;
    this.trim();
    return slot;
  }
  resize(slot: { cost: number; live: boolean }, cost: number): void {
    if (!slot.live) return;
    this.bytes += cost - slot.cost;
    slot.cost = cost;
    this.trim();
  }
  trim(): void {
    if (this.bytes <= this.maxBytes) return;
    for (const [key, slot] of this.entries) {
      if (this.bytes <= this.maxBytes) return;
      this.entries.delete(key);
      if (slot.used) {
        slot.used = false;
        this.entries.set(key, slot);
      } else {
        slot.live = false;
        this.bytes -= slot.cost;
      }
    }
  }
}

test('eviction drops the same entries as when it walked the Map in its order, over 200,000 random gets, sets and resizes', () => {
  let seed = 7;
  const rand = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
  for (const maxBytes of [500, 4_000, 40_000]) {
    const cache = new RecentCache<number>(maxBytes);
    const reference = new MapOrderedCache<number>(maxBytes);
    const slots: [NonNullable<ReturnType<typeof cache.set>>, NonNullable<ReturnType<typeof reference.set>>][] = [];
    for (let op = 0; op < 200_000 / 3; op++) {
      // Keys from a few hot ones to many one-off ones; costs up to over a quarter of the bound (not kept).
      const key = `k${rand(4) === 0 ? rand(8) : rand(2_000)}`;
      const kind = rand(10);
      if (rand(300) === 0) {
        // Every entry used, then one grows: eviction must come round to the ones it moved to the back.
        for (const k of [...reference.entries.keys()]) assert.equal(cache.get(k), reference.get(k));
        const grown = cache.set(key, op, Math.floor(maxBytes / 5));
        const twin = reference.set(key, op, Math.floor(maxBytes / 5));
        for (const k of [...reference.entries.keys()]) assert.equal(cache.get(k), reference.get(k));
        if (grown && twin) {
          cache.resize(grown, Math.floor(maxBytes / 4));
          reference.resize(twin, Math.floor(maxBytes / 4));
        }
      } else if (kind < 5) assert.equal(cache.get(key), reference.get(key), `get ${key}`);
      else if (kind < 9) {
        const cost = 1 + rand(Math.ceil(maxBytes / 3));
        const a = cache.set(key, op, cost);
        const b = reference.set(key, op, cost);
        assert.equal(a === undefined, b === undefined);
        if (a && b) slots.push([a, b]);
        if (slots.length > 64) slots.splice(rand(slots.length), 1);
      } else if (slots.length > 0) {
        const [a, b] = slots[rand(slots.length)];
        const cost = 1 + rand(Math.ceil(maxBytes / 5));
        cache.resize(a, cost);
        reference.resize(b, cost);
      }
      assert.equal(cache.bytes, reference.bytes, `op ${op}`);
      assert.equal(cache.size, reference.entries.size, `op ${op}`);
    }
    for (const key of reference.entries.keys()) assert.ok(cache.has(key), key);
  }
});
