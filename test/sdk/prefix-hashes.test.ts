// Prefix hashes must agree across routers and releases: a fleet of routers,
// or one mid-upgrade, keys its affinity memory by them. The pinned values were
// computed by the release before prefixHashes read the prompt through a buffer.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { hashString, mixHashes, prefixHashes } from '../../sdk/index.ts';
import { hashRange } from '../../sdk/hashing.ts';

const TEXT = 'You are a helpful assistant.\n'.repeat(10) + 'é€😀\ud800 tail';

test('prefix hashes keep their values from release to release', () => {
  assert.deepEqual(prefixHashes(TEXT, 'llama-3-8b-instruct', 64, 256), [2877895893, 2688632228, 1120362940, 584793046]);
  assert.deepEqual(prefixHashes(TEXT, 'm\0a', 7, 3), [3327765084, 4066118316, 2505956169]);
  assert.equal(hashString('conv-1'), 307569951);
});

/** The definition: block i chains hashRange of its characters onto block i-1. */
function byDefinition(text: string, seed: string, blockChars: number, maxBlocks: number): number[] {
  const out: number[] = [];
  let previous = hashString(seed);
  for (let i = 0; i < Math.min(maxBlocks, Math.floor(text.length / blockChars)); i++) {
    previous = mixHashes(previous, hashRange(text, i * blockChars, (i + 1) * blockChars));
    out.push(previous);
  }
  return out;
}

test('prefix hashes equal their definition for any text, lone surrogates and prompts longer than one copy included', () => {
  const unit = fc.oneof(fc.constantFrom('a', ' ', '\n', 'é', '😀', '\ud800', '\udfff', 'x'.repeat(500)), fc.fullUnicodeString({ maxLength: 8 }));
  fc.assert(
    fc.property(fc.array(unit, { maxLength: 400 }), fc.constantFrom(2, 7, 16, 64, 100), fc.constantFrom(3, 256, Infinity), (parts, blockChars, maxBlocks) => {
      const text = parts.join('');
      assert.deepEqual(prefixHashes(text, 'model', blockChars, maxBlocks), byDefinition(text, 'model', blockChars, maxBlocks));
    }),
    { numRuns: 2000, seed: 7 },
  );
  const long = 'The quick brown fox jumps over the lazy dog. '.repeat(2000); // 90,000 characters: several copies
  assert.deepEqual(prefixHashes(long, 's', 64, Infinity), byDefinition(long, 's', 64, Infinity));
});
