import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { HashIndex } from '../../sim/engine/hash-index.ts';
import { KvCache } from '../../sim/engine/kv-cache.ts';

describe('HashIndex', () => {
  it('agrees with a Map under any sequence of adds and deletes, collisions included', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('add' as const), key: fc.integer({ min: 0, max: 40 }), value: fc.integer({ min: 0, max: 7 }) }),
      fc.record({ kind: fc.constant('delete' as const), key: fc.integer({ min: 0, max: 40 }), value: fc.integer({ min: 0, max: 7 }) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
        const index = new HashIndex(8);
        const model = new Map<number, number>();
        for (const { kind, key, value } of ops) {
          // Keys spread over 32 bits, as prefix hashes are, but few enough to collide in 16 slots.
          const wide = key * 0x0101_0101 + 0x8000_0000;
          if (kind === 'add') {
            if (model.size >= 8 && !model.has(wide)) continue;
            assert.equal(index.add(wide, value), !model.has(wide));
            if (!model.has(wide)) model.set(wide, value);
          } else {
            index.deleteIf(wide, value);
            if (model.get(wide) === value) model.delete(wide);
          }
          assert.equal(index.size, model.size);
        }
        for (let key = 0; key <= 40; key++) {
          const wide = key * 0x0101_0101 + 0x8000_0000;
          assert.equal(index.get(wide), model.get(wide) ?? -1);
        }
      }),
    );
  });
});

describe('KvCache', () => {
  it('allocates all or nothing and counts usage in referenced blocks', () => {
    const kv = new KvCache(8, 16);
    const a: number[] = [];
    assert.equal(kv.allocate(5, a), true);
    assert.equal(kv.usage, 5 / 8);
    const b: number[] = [];
    assert.equal(kv.allocate(4, b), false);
    assert.deepEqual(b, []);
    assert.equal(kv.freeBlocks, 3);
    kv.release(a);
    assert.equal(kv.usage, 0);
  });

  it('finds the longest cached prefix and stops at the first miss', () => {
    const kv = new KvCache(8, 16);
    const blocks: number[] = [];
    kv.allocate(3, blocks);
    kv.cache(blocks[0], 101);
    kv.cache(blocks[1], 102);
    kv.cache(blocks[2], 103);
    assert.equal(kv.lookup([101, 102, 103], 10), 3);
    assert.equal(kv.lookup([101, 999, 103], 10), 1);
    assert.equal(kv.lookup([101, 102, 103], 2), 2);
    assert.equal(kv.lookup([7], 10), 0);
  });

  it('keeps a freed prefix cached until allocation needs its blocks, and a hit takes it back', () => {
    const kv = new KvCache(4, 16);
    const first: number[] = [];
    kv.allocate(2, first);
    kv.cache(first[0], 1);
    kv.cache(first[1], 2);
    kv.release(first);
    assert.equal(kv.freeBlocks, 4);
    assert.equal(kv.cachedBlocks, 2);

    // A hit on unreferenced cached blocks takes them out of the free queue.
    assert.equal(kv.lookup([1, 2], 2), 2);
    assert.equal(kv.unreferencedFound(2), 2);
    const again: number[] = [];
    kv.acquireFound(2, again);
    assert.deepEqual(again, first);
    assert.equal(kv.freeBlocks, 2);
    kv.release(again);

    // Uncached blocks are reused before cached ones; then the oldest cached go.
    const fill: number[] = [];
    kv.allocate(2, fill);
    assert.equal(kv.cachedBlocks, 2);
    kv.allocate(1, fill);
    assert.equal(kv.cachedBlocks, 1);
    // The prompt's tail was evicted before its head.
    assert.equal(kv.lookup([1, 2], 2), 1);
  });

  it('keeps the first copy when two blocks hold the same prefix', () => {
    const kv = new KvCache(4, 16);
    const a: number[] = [];
    const b: number[] = [];
    kv.allocate(1, a);
    kv.allocate(1, b);
    kv.cache(a[0], 42);
    kv.cache(b[0], 42);
    kv.release(b);
    kv.allocate(3, []);
    assert.equal(kv.lookup([42], 1), 1);
  });

  it('its typed-array methods (the engine\'s) do what the array ones do', () => {
    // Requests hold blocks, cache some, share prefixes through lookups, and release; two caches, one
    // driven through number[] and one through Int32Array, must give the same blocks and state.
    const op = fc.record({
      prompt: fc.integer({ min: 0, max: 5 }),
      blocks: fc.integer({ min: 1, max: 6 }),
      extra: fc.integer({ min: 0, max: 3 }),
      release: fc.integer({ min: 0, max: 3 }),
    });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const a = new KvCache(16, 16);
        const b = new KvCache(16, 16);
        const heldA: number[][] = [];
        const heldB: { blocks: Int32Array; n: number }[] = [];
        for (const { prompt, blocks, extra, release } of ops) {
          const hashes = Array.from({ length: blocks }, (_, i) => prompt * 100 + i);
          const hits = a.lookup(hashes, blocks);
          assert.equal(b.lookup(hashes, blocks), hits);
          assert.equal(b.unreferencedFound(hits), a.unreferencedFound(hits));
          const need = blocks - hits + extra;
          if (need + a.unreferencedFound(hits) <= a.freeBlocks) {
            const listA: number[] = [];
            a.acquireFound(hits, listA);
            assert.equal(a.allocate(need, listA), true);
            const arrayB = new Int32Array(blocks + extra);
            const n = b.allocateAt(need, arrayB, b.acquireFoundAt(hits, arrayB, 0));
            assert.deepEqual(Array.from(arrayB.subarray(0, n)), listA);
            for (let i = hits; i < blocks; i++) {
              a.cache(listA[i], hashes[i]);
              b.cache(arrayB[i], hashes[i]);
            }
            heldA.push(listA);
            heldB.push({ blocks: arrayB, n });
          }
          for (let r = 0; r < release && heldA.length > 0; r++) {
            const i = (prompt + r) % heldA.length;
            a.release(heldA.splice(i, 1)[0]);
            const { blocks: array, n } = heldB.splice(i, 1)[0];
            b.releaseAt(array, n);
          }
          assert.equal(b.freeBlocks, a.freeBlocks);
          assert.equal(b.cachedBlocks, a.cachedBlocks);
        }
      }),
    );
  });
});
