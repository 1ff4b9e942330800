// The KV cache extends the segment a request alone holds without looking its
// stream up when the request fills its next block (sim/engine/kv-cache.ts).
// That shortcut is right only while nothing else cached blocks after it, took a
// reference on it or split it: here requests sharing streams fill their blocks
// a few at a time, interleaved, with releases between, and the range model
// must agree with the block-by-block model after every step.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { KvCache, type KvHolding } from '../../sim/engine/kv-cache.ts';
import type { PromptBlocks } from '../../sim/engine/prompt-blocks.ts';
import { BlockByBlockCache } from '../emulator/block-kv-cache.ts';

interface Held {
  readonly prompt: PromptBlocks;
  readonly total: number;
  readonly run: KvHolding;
  readonly block: { blocks: number[] };
  /** Blocks cached so far (the next fill starts here). */
  next: number;
}

describe('KV cache: requests filling blocks of shared streams, interleaved', () => {
  it('agrees with the block-by-block model after every fill and release', () => {
    const request = fc.record({
      // Few streams, so that requests share them and fill the same blocks at once; a request
      // often hits nothing (maxHit 0) and so computes blocks another is computing too.
      system: fc.integer({ min: 0, max: 1 }),
      systemBlocks: fc.integer({ min: 0, max: 4 }),
      own: fc.constant(0),
      blocks: fc.integer({ min: 1, max: 14 }),
      maxHit: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 14 })),
    });
    const step = fc.oneof(
      { arbitrary: fc.record({ kind: fc.constant('admit' as const), request }), weight: 2 },
      { arbitrary: fc.record({ kind: fc.constant('fill' as const), pick: fc.nat(), blocks: fc.integer({ min: 1, max: 2 }) }), weight: 6 },
      { arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }), weight: 1 },
    );
    // Long runs: the shortcut's guards (a reference taken on the segment, a segment cached
    // after it) need requests admitted while others are half filled.
    fc.assert(
      fc.property(fc.array(step, { minLength: 60, maxLength: 160 }), fc.integer({ min: 16, max: 64 }), (steps, numBlocks) => {
        const runs = new KvCache(numBlocks, 16);
        const blocks = new BlockByBlockCache(numBlocks, 16);
        const held: Held[] = [];
        for (const s of steps) {
          if (s.kind === 'admit') {
            const r = s.request;
            const system = Math.min(r.systemBlocks, r.blocks);
            const prompt: PromptBlocks = {
              streams: system === 0 ? [10 + r.own] : system === r.blocks ? [r.system] : [r.system, 10 + 4 * r.system + r.own],
              ends: system === 0 || system === r.blocks ? [r.blocks] : [system, r.blocks],
            };
            const max = Math.min(r.maxHit, r.blocks);
            const hits = runs.lookup(prompt, max);
            assert.equal(blocks.lookup(prompt, max), hits, 'lookup');
            if (r.blocks - hits + runs.unreferencedFound > runs.freeBlocks) continue;
            const entry: Held = { prompt, total: r.blocks, run: runs.newHolding(), block: blocks.newHolding(), next: hits };
            runs.acquireFound(entry.run, prompt, hits);
            blocks.acquireFound(entry.block, prompt, hits);
            runs.allocate(entry.run, r.blocks - hits);
            blocks.allocate(entry.block, r.blocks - hits);
            held.push(entry);
          } else if (s.kind === 'fill') {
            const filling = held.filter((h) => h.next < h.total);
            if (filling.length === 0) continue;
            const entry = filling[s.pick % filling.length];
            const to = Math.min(entry.total, entry.next + s.blocks);
            runs.cache(entry.run, entry.prompt, entry.next, to);
            blocks.cache(entry.block, entry.prompt, entry.next, to);
            entry.next = to;
          } else {
            if (held.length === 0) continue;
            const [entry] = held.splice(s.pick % held.length, 1);
            runs.release(entry.run);
            blocks.release(entry.block);
          }
          assert.equal(runs.freeBlocks, blocks.freeBlocks, 'free blocks');
          assert.equal(runs.cachedBlocks, blocks.cachedBlocks, 'cached blocks');
          for (const h of held) assert.equal(h.run.size, h.block.blocks.length, 'blocks held');
        }
        for (const { prompt, total } of held) assert.equal(runs.lookup(prompt, total), blocks.lookup(prompt, total), 'lookup after all');
      }),
      { numRuns: 300 },
    );
  });
});
