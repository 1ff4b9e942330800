// A chat's hasCode is looked for message by message (core/facts/code.ts,
// contentsLookLikeCode) instead of in its contents joined one a line: the
// answer must be the joined text's for every chat, marks across a join
// included. The reference is the joining the facts used before.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CODE_SCAN_CHARS, contentsLookLikeCode, looksLikeCode } from '../../core/facts/code.ts';
import { requestFacts, type RequestFacts } from '../../core/facts/request-facts.ts';
import { seededRandom } from '../../sdk/index.ts';

/** The contents one a line, up to about maxChars: what code detection was given before. */
function referenceJoin(contents: readonly string[], maxChars: number): string {
  let text = '';
  for (const content of contents) {
    text += (text === '' ? '' : '\n') + content;
    if (text.length >= maxChars) break;
  }
  return text;
}
const reference = (contents: readonly string[]) => looksLikeCode(referenceJoin(contents, CODE_SCAN_CHARS));

// Pieces that make or break code marks, and those around them: keywords, brackets, every kind of whitespace and line end, prose, CJK, emoji.
const PIECES = [
  'def',
  'class',
  'import',
  'from',
  'function',
  'fn',
  'func',
  'public',
  'private',
  '#include',
  'package',
  'const',
  'let',
  'var',
  'if',
  'for',
  'while',
  'x',
  'foo',
  'the cat sat',
  'defx',
  ' ',
  '  ',
  '\n',
  '\r\n',
  '\t',
  '\u00a0',
  '\u2028',
  '\u3000',
  '\ufeff',
  '(',
  ')',
  '{',
  '}',
  ';',
  '=',
  '>',
  '=>',
  '`',
  '```',
  'a(b)',
  ') {',
  '漢字',
  '한국어',
  '😀',
  'café',
  '.',
  ',',
];

function chat(next: () => number, filler: number): string[] {
  const messages: string[] = [];
  const count = Math.floor(next() * 6);
  for (let m = 0; m < count; m++) {
    let text = next() < 0.3 && filler > 0 ? 'word '.repeat(Math.floor((filler + next() * 40 - 20) / 5)) : '';
    const pieces = Math.floor(next() * 8);
    for (let p = 0; p < pieces; p++) text += PIECES[Math.floor(next() * PIECES.length)];
    messages.push(text);
  }
  return messages;
}

test('hasCode by message is the joined contents’ answer on random chats (keywords, brackets, whitespace, line ends across joins)', () => {
  const next = seededRandom(22);
  let coded = 0;
  for (let i = 0; i < 200_000; i++) {
    const contents = chat(next, 0);
    const expected = reference(contents);
    coded += expected ? 1 : 0;
    assert.equal(contentsLookLikeCode(contents), expected, JSON.stringify(contents));
  }
  // Both answers occur often: the cases are not all one way.
  assert.ok(coded > 20_000 && coded < 180_000, `${coded} of 200000 with code`);
});

test('hasCode by message stops where the joined text was cut, at and around the scanned length', () => {
  const next = seededRandom(7);
  for (let i = 0; i < 3_000; i++) {
    const contents = chat(next, CODE_SCAN_CHARS / (1 + Math.floor(next() * 3)));
    assert.equal(contentsLookLikeCode(contents), reference(contents), JSON.stringify(contents.map((c) => c.slice(-40))));
  }
  // A mark just inside the cut counts, one just past it does not.
  const head = 'word '.repeat(CODE_SCAN_CHARS / 5 - 1);
  for (let pad = 0; pad < 12; pad++) {
    const contents = [head + ' '.repeat(pad), 'x = 1;'];
    assert.equal(contentsLookLikeCode(contents), reference(contents), `pad ${pad}`);
  }
});

test('a chat whose code mark crosses two messages has code, as the joined text does', () => {
  const facts = requestFacts(
    {
      requestId: 'r',
      endpoint: 'chat',
      headers: {},
      body: {
        model: 'm',
        messages: [
          { role: 'user', content: 'while (busy)' },
          { role: 'user', content: '{' },
        ],
      },
    },
    {},
  ) as RequestFacts;
  assert.equal(facts.hasCode, true);
  for (const split of [
    ['if', '(x) {'],
    ['return a;', 'ok'],
    ['def', 'f'],
    ['f =>', ' { x'],
    ['see (above)', 'thanks'],
  ]) {
    assert.equal(contentsLookLikeCode(split), reference(split), JSON.stringify(split));
  }
});

test('long messages that recur (their scans remembered) get the joined contents’ answer, asked again and again in any company', () => {
  const next = seededRandom(31);
  // Long messages, some ending in a mark that needs the next message (`)`, `=>`, a keyword alone), some with code inside, some prose.
  const endings = ['', ' see (above)', ' f =>', '\nwhile', '\ndef', ' x = 1;', '\n```', ' (a)\n'];
  const recurring = Array.from({ length: 60 }, (_, i) => 'word '.repeat(26 + i * 7) + endings[i % endings.length]);
  // Two messages of the same length and ends (one slot, maybe): equality decides, not the slot.
  recurring.push(`${'word '.repeat(40)}x`, `${'word '.repeat(20)}if (${'word '.repeat(19)}x`);
  let coded = 0;
  for (let i = 0; i < 20_000; i++) {
    const count = 1 + Math.floor(next() * 4);
    const contents = Array.from({ length: count }, () =>
      next() < 0.6 ? recurring[Math.floor(next() * recurring.length)] : PIECES[Math.floor(next() * PIECES.length)],
    );
    const expected = reference(contents);
    coded += expected ? 1 : 0;
    assert.equal(contentsLookLikeCode(contents), expected, JSON.stringify(contents.map((c) => c.slice(-20))));
  }
  assert.ok(coded > 2_000 && coded < 18_000, `${coded} of 20000 with code`);
});

test('messages longer than the remembered length, or than the scanned part, get the joined contents’ answer, asked again in any company', () => {
  const next = seededRandom(44);
  // Past 16,384 characters a scan is remembered by the scanned part alone: marks just inside and just past the cut, and at its ends.
  const lengths = [16_384, 16_385, 20_000, CODE_SCAN_CHARS - 1, CODE_SCAN_CHARS, CODE_SCAN_CHARS + 1, 40_000];
  const tails = ['', ' x = 1;', ' see (above)', '\nwhile', ' f =>'];
  const recurring: string[] = [];
  for (const length of lengths) {
    for (const tail of tails) {
      const head = 'word '.repeat(Math.ceil(length / 5)).slice(0, length - tail.length);
      recurring.push(head + tail);
      // The same scanned part, a different end past it: remembered by the part, the same answer.
      recurring.push(`${head + tail}\nint main() {`);
    }
  }
  for (let i = 0; i < 3_000; i++) {
    const count = 1 + Math.floor(next() * 3);
    const contents = Array.from({ length: count }, () =>
      next() < 0.7 ? recurring[Math.floor(next() * recurring.length)] : PIECES[Math.floor(next() * PIECES.length)],
    );
    assert.equal(contentsLookLikeCode(contents), reference(contents), JSON.stringify(contents.map((c) => `${c.length}:${c.slice(-20)}`)));
  }
});
