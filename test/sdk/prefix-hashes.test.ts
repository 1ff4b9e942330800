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

test('prefix hashes of prompts sharing their beginnings (hashed once, remembered) equal their definition', () => {
  // Documents, questions after them, conversations growing turn by turn, other seeds and block sizes, in any order:
  // whatever was hashed before, a prompt's hashes are its own.
  const word = fc.constantFrom('the ', 'router ', 'é', '😀', '\n', 'x'.repeat(63), 'y'.repeat(64), '\ud800');
  const doc = fc.array(word, { minLength: 0, maxLength: 300 }).map((w) => w.join(''));
  fc.assert(
    fc.property(
      fc.array(doc, { minLength: 1, maxLength: 4 }),
      fc.array(fc.tuple(fc.nat(3), fc.array(doc, { maxLength: 3 }), fc.constantFrom('m', 'm\0a'), fc.constantFrom(16, 64), fc.constantFrom(12, 256)), {
        minLength: 1,
        maxLength: 12,
      }),
      (docs, prompts) => {
        for (const [d, tails, seed, blockChars, maxBlocks] of prompts) {
          const text = docs[d % docs.length] + tails.join('');
          assert.deepEqual(prefixHashes(text, seed, blockChars, maxBlocks), byDefinition(text, seed, blockChars, maxBlocks));
        }
      },
    ),
    { numRuns: 500, seed: 11 },
  );
  // A conversation's turns, then a question after the same document, then the document cut short.
  const document = 'A shared document of some length. '.repeat(500);
  let conversation = document;
  for (let turn = 0; turn < 6; turn++) {
    conversation += `question ${turn}, and its answer. `.repeat(turn + 1);
    assert.deepEqual(prefixHashes(conversation, 'm'), byDefinition(conversation, 'm', 64, 256));
  }
  for (const text of [`${document}another question`, document.slice(0, 5000), `${document.slice(0, 3000)}!${document.slice(3001)}`, document]) {
    assert.deepEqual(prefixHashes(text, 'm'), byDefinition(text, 'm', 64, 256));
    assert.deepEqual(prefixHashes(text, 'm2'), byDefinition(text, 'm2', 64, 256));
  }
});

test('the hashes a caller gets are its own: changing them changes nothing remembered', () => {
  const hashes = prefixHashes(`${'a'.repeat(20_000)}${'b'.repeat(1_000_000)}`, 'm');
  assert.equal(hashes.length, 256);
  hashes[3] = 0;
  assert.deepEqual(prefixHashes(`${'a'.repeat(20_000)}c`, 'm'), byDefinition(`${'a'.repeat(20_000)}c`, 'm', 64, 256));
});
