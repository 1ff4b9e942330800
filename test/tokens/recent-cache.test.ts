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
