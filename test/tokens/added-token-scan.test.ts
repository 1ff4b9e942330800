// The added-token splitter (core/tokens/segments.ts) finds where a token may
// start with indexOf when the tokens start with at most four distinct
// characters, and looks each character up otherwise: over random text made of
// the tokens' own characters, both ways cut the same pieces at the same place.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { AddedTokenSplitter } from '../../core/tokens/segments.ts';

const token = (id: number, content: string, extra: { lstrip?: boolean; rstrip?: boolean } = {}) => ({
  id,
  content,
  special: true,
  normalized: false,
  ...extra,
});
const scanned = [token(1, '<|a|>'), token(2, '<|ab|>', { rstrip: true }), token(3, '[x]'), token(4, '{y}', { lstrip: true }), token(5, '(z')];
const splitter = (tokens: typeof scanned) => new AddedTokenSplitter({ tokenizerJson: { added_tokens: tokens }, tokenizer: { normalizer: null } } as never);

test('the indexOf scan and the per-character look-up cut the same pieces, with the same stable cut', () => {
  const byIndexOf = splitter(scanned); // first characters < [ { ( : four
  // A fifth first character, never in the text below, makes the splitter look up each character instead.
  const byLookUp = splitter([...scanned, token(6, '#never')]);
  const text = fc.stringOf(fc.constantFrom('<', '|', 'a', 'b', '>', '[', 'x', ']', '{', 'y', '}', '(', 'z', ' ', 'q'), { maxLength: 60 });
  fc.assert(
    fc.property(text, (t) => {
      assert.deepEqual(byIndexOf.splitWithCut(t), byLookUp.splitWithCut(t));
    }),
    { numRuns: 2000, seed: 7 },
  );
  assert.deepEqual(byIndexOf.split('q<|ab|> {y}(z'), [{ text: 'q' }, { id: 2 }, { id: 4 }, { id: 5 }]);
});

test('an added token with a character outside the BMP (a surrogate pair) is cut where it stands, and a longer one wins', () => {
  const withPair = splitter([token(1, '<\u{1F600}>'), token(2, '<\u{1F600}>x'), token(3, '<|a|>')]);
  assert.deepEqual(withPair.split('a<\u{1F600}>b<\u{1F600}>x<\u{1F601}>'), [{ text: 'a' }, { id: 1 }, { text: 'b' }, { id: 2 }, { text: '<\u{1F601}>' }]);
  // The text ends inside the longer token: appended text may still extend the match, so the stable cut stays before it.
  const { cut, cutAt } = withPair.splitWithCut('<|a|><\u{1F600}>');
  assert.equal(cut, 1);
  assert.equal(cutAt, 5);
});
