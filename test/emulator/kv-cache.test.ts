import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { KvCache, type KvHolding } from '../../sim/engine/kv-cache.ts';
import { blocksOfHashes, type PromptBlocks } from '../../sim/engine/prompt-blocks.ts';
import { BlockByBlockCache } from './block-kv-cache.ts';
import { HashIndex } from './hash-index.ts';

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

/** A request's whole life in the cache, as the engine drives it: look up, acquire the hits, allocate the rest, compute. */
function admit(kv: KvCache, prompt: PromptBlocks, blocks: number): KvHolding {
  const holding = kv.newHolding();
  const hits = kv.lookup(prompt, blocks);
  kv.acquireFound(holding, prompt, hits);
  kv.allocate(holding, blocks - hits);
  kv.cache(holding, prompt, hits, blocks);
  return holding;
}

describe('KvCache', () => {
  it('counts usage in referenced blocks; a freed prompt stays cached but free', () => {
    const kv = new KvCache(8, 16);
    const prompt = blocksOfHashes([1, 2, 3, 4, 5]);
    const a = admit(kv, prompt, 5);
    assert.equal(kv.usage, 5 / 8);
    assert.equal(kv.freeBlocks, 3);
    assert.equal(a.size, 5);
    kv.release(a);
    assert.equal(kv.usage, 0);
    assert.equal(kv.cachedBlocks, 5);
  });

  it('finds the longest cached prefix and stops at the first miss', () => {
    const kv = new KvCache(16, 16);
    admit(kv, blocksOfHashes([101, 102, 103]), 3);
    assert.equal(kv.lookup(blocksOfHashes([101, 102, 103]), 10), 3);
    assert.equal(kv.lookup(blocksOfHashes([101, 999, 103]), 10), 1);
    assert.equal(kv.lookup(blocksOfHashes([101, 102, 103]), 2), 2);
    assert.equal(kv.lookup(blocksOfHashes([7]), 10), 0);
    // Runs: the same stream shares blocks up to where the prompts part.
    const runs = (second: number, end: number): PromptBlocks => ({ streams: [50, second], ends: [4, end] });
    admit(kv, runs(60, 6), 6);
    assert.equal(kv.lookup(runs(60, 9), 9), 6);
    assert.equal(kv.lookup(runs(61, 9), 9), 4);
  });

  it('keeps a freed prefix cached until allocation needs its blocks, and a hit takes it back', () => {
    const kv = new KvCache(4, 16);
    const prompt = blocksOfHashes([1, 2]);
    kv.release(admit(kv, prompt, 2));
    assert.equal(kv.freeBlocks, 4);
    assert.equal(kv.cachedBlocks, 2);

    // A hit on unreferenced cached blocks takes them out of the free queue.
    assert.equal(kv.lookup(prompt, 2), 2);
    assert.equal(kv.unreferencedFound, 2);
    const again = kv.newHolding();
    kv.acquireFound(again, prompt, 2);
    assert.equal(kv.freeBlocks, 2);
    kv.release(again);

    // Uncached blocks are reused before cached ones; then the oldest cached go.
    const fill = kv.newHolding();
    kv.allocate(fill, 2);
    assert.equal(kv.cachedBlocks, 2);
    kv.allocate(fill, 1);
    assert.equal(kv.cachedBlocks, 1);
    // The prompt's tail was evicted before its head.
    assert.equal(kv.lookup(prompt, 2), 1);
  });

  it('keeps the first copy when two requests compute the same prefix', () => {
    const kv = new KvCache(4, 16);
    const prompt = blocksOfHashes([42]);
    const a = kv.newHolding();
    const b = kv.newHolding();
    kv.allocate(a, 1);
    kv.allocate(b, 1);
    kv.cache(a, prompt, 0, 1);
    kv.cache(b, prompt, 0, 1);
    assert.equal(kv.cachedBlocks, 1);
    kv.release(b);
    kv.allocate(kv.newHolding(), 3);
    assert.equal(kv.lookup(prompt, 1), 1);
  });

  it('does what the block-by-block model does, under any mix of shared prefixes, chunked prefill, decode and release', () => {
    // A prompt is a system prompt (one of 3 streams, 0-5 blocks) and a conversation's own
    // blocks (one of 4 streams, starting where the system prompt ends), or a run per block.
    const request = fc.record({
      system: fc.integer({ min: 0, max: 2 }),
      systemBlocks: fc.integer({ min: 0, max: 5 }),
      own: fc.integer({ min: 0, max: 3 }),
      blocks: fc.integer({ min: 1, max: 12 }),
      perBlock: fc.boolean(),
      maxHit: fc.integer({ min: 0, max: 12 }),
      chunk: fc.integer({ min: 1, max: 12 }),
      decode: fc.integer({ min: 0, max: 4 }),
      release: fc.array(fc.nat(), { maxLength: 3 }),
    });
    fc.assert(
      fc.property(fc.array(request, { maxLength: 80 }), fc.integer({ min: 4, max: 40 }), (requests, numBlocks) => {
        const runs = new KvCache(numBlocks, 16);
        const blocks = new BlockByBlockCache(numBlocks, 16);
        const held: { prompt: PromptBlocks; total: number; run: KvHolding; block: { blocks: number[] } }[] = [];
        for (const r of requests) {
          const system = Math.min(r.systemBlocks, r.blocks);
          const prompt: PromptBlocks = r.perBlock
            ? blocksOfHashes(Array.from({ length: r.blocks }, (_, j) => (j < system ? 1000 * (r.system + 1) + j : 100 * (r.own + 1) + j)))
            : {
                streams: system === 0 ? [10 + r.own] : system === r.blocks ? [r.system] : [r.system, 10 + 4 * r.system + r.own],
                ends: system === 0 || system === r.blocks ? [r.blocks] : [system, r.blocks],
              };
          const max = Math.min(r.maxHit, r.blocks);
          const hits = runs.lookup(prompt, max);
          assert.equal(blocks.lookup(prompt, max), hits, 'lookup');
          assert.equal(runs.unreferencedFound, blocks.unreferencedFound, 'unreferenced');
          if (r.blocks - hits + runs.unreferencedFound <= runs.freeBlocks) {
            const entry = { prompt, total: r.blocks, run: runs.newHolding(), block: blocks.newHolding() };
            runs.acquireFound(entry.run, prompt, hits);
            blocks.acquireFound(entry.block, prompt, hits);
            runs.allocate(entry.run, r.blocks - hits);
            blocks.allocate(entry.block, r.blocks - hits);
            // Chunked prefill: the prompt's blocks are cached a chunk at a time.
            for (let from = hits; from < r.blocks; from += r.chunk) {
              const to = Math.min(r.blocks, from + r.chunk);
              runs.cache(entry.run, prompt, from, to);
              blocks.cache(entry.block, prompt, from, to);
            }
            const decode = Math.min(r.decode, runs.freeBlocks);
            runs.allocate(entry.run, decode);
            blocks.allocate(entry.block, decode);
            assert.equal(entry.run.size, entry.block.blocks.length, 'blocks held');
            held.push(entry);
          }
          for (const pick of r.release) {
            if (held.length === 0) break;
            const [entry] = held.splice(pick % held.length, 1);
            runs.release(entry.run);
            blocks.release(entry.block);
          }
          assert.equal(runs.freeBlocks, blocks.freeBlocks, 'free blocks');
          assert.equal(runs.cachedBlocks, blocks.cachedBlocks, 'cached blocks');
        }
        // Every prompt seen finds what the block model finds, after all that.
        for (const { prompt, total } of held) assert.equal(runs.lookup(prompt, total), blocks.lookup(prompt, total));
      }),
      { numRuns: 500 },
    );
  });
});
