// The character-class estimate's walk (core/tokens/estimate.ts, chargeRanges)
// is bounded by the text's length as well as by its ranges, so that V8 drops
// its range checks: the charges must be the ones the walk gave before, on
// every kind of text and every set of ranges inside it. The reference is the
// walk as it was, with its own copy of the class table.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chargeRange, chargeRanges, characterClassEstimator, estimateTokens } from '../../core/tokens/estimate.ts';
import { sampledEstimate } from '../../core/facts/sampled-estimate.ts';
import { requestFacts, type RequestFacts } from '../../core/facts/request-facts.ts';
import { seededRandom } from '../../sdk/index.ts';

function slowKindOf(c: number): number {
  if (c < 128) {
    if (c === 32 || c === 9) return 0;
    if (c === 10 || c === 13) return 1;
    if ((c >= 97 && c <= 122) || (c >= 65 && c <= 90)) return 2;
    if (c >= 48 && c <= 57) return 3;
    if (c < 32) return 11;
    return 4;
  }
  if (c <= 0x024f) return c >= 0xc0 && c !== 0xd7 && c !== 0xf7 ? 2 : 11;
  if (c >= 0x4e00 && c <= 0x9fff) return 5;
  if (c >= 0x3040 && c <= 0x30ff) return 6;
  if (c >= 0xac00 && c <= 0xd7af) return 7;
  if (c >= 0xd800 && c <= 0xdfff) return 10;
  if (c >= 0x0e00 && c <= 0x0e7f) return 8;
  if ((c >= 0x3400 && c <= 0x4dbf) || (c >= 0xf900 && c <= 0xfaff) || (c >= 0x3000 && c <= 0x303f) || (c >= 0xff00 && c <= 0xffef)) return 5;
  if ((c >= 0x1100 && c <= 0x11ff) || (c >= 0x3130 && c <= 0x318f)) return 7;
  if (c >= 0x0370 && c <= 0x1fff) return 9;
  return 11;
}
const KINDS = new Uint8Array(65536).map((_, c) => slowKindOf(c));
const PER_CHAR = [0, 0, 0, 0, 0, 0.85, 0.75, 0.9, 0.56, 0.45, 1, 1];
function runTokens(kind: number, run: number, rate: number, wordRate: number): number {
  if (kind === 2) return 1 + Math.floor(Math.max(0, run - wordRate) / rate + 0.5);
  if (kind === 3 || kind === 4) return Math.ceil(run / 2);
  if (kind === 0) return run > 1 ? 1 : 0;
  if (kind === 1) return 1;
  return 0;
}
/** The walk before: the same sums, added in the same order. */
function referenceRanges(text: string, bounds: readonly number[], tokens: number, rate: number, out?: { fractional: boolean }): number {
  const wordRate = rate * 1.5;
  let run = 0;
  let runKind = -1;
  let fractional = false;
  for (let r = 0; r + 1 < bounds.length; r += 2) {
    for (let i = bounds[r]; i < bounds[r + 1]; i++) {
      const kind = KINDS[text.charCodeAt(i)];
      if (kind === runKind) {
        run++;
        continue;
      }
      if (run > 0) tokens += runTokens(runKind, run, rate, wordRate);
      const perChar = PER_CHAR[kind];
      if (perChar > 0) {
        tokens += perChar;
        if (perChar !== 1) fractional = true;
        run = 0;
        runKind = -1;
      } else {
        run = 1;
        runKind = kind;
      }
    }
  }
  if (run > 0) tokens += runTokens(runKind, run, rate, wordRate);
  if (out !== undefined) out.fractional = fractional;
  return tokens;
}

// Prose, code, CJK, kana, Hangul, Thai, Cyrillic, emoji (surrogate pairs), lone surrogates, every kind of whitespace, digits, controls.
const PIECES = [
  'the',
  'router',
  'internationalization',
  'café',
  'naïve',
  ' ',
  '  ',
  '\t',
  '\n',
  '\r\n',
  '\n\n\n',
  '    ',
  'x',
  'A',
  '42',
  '3.14159',
  'const x = f(a, b);',
  '=> {',
  '});',
  '"key": [1, 2]',
  '漢字',
  '中文文本',
  'ひらがな',
  'カタカナ',
  '한국어',
  'ภาษาไทย',
  'Привет',
  'Ελληνικά',
  '😀',
  '👍🏽',
  '\ud800',
  '\u00a0',
  '\u3000',
  '×',
  '\u0001',
  '—',
  '…',
  '～',
  '٣',
];

function text(next: () => number, pieces: number): string {
  let out = '';
  for (let p = 0; p < pieces; p++) out += PIECES[Math.floor(next() * PIECES.length)];
  return out;
}

test('the walk charges every random text and set of ranges exactly as before, fraction flag included', () => {
  const next = seededRandom(22);
  for (let i = 0; i < 20_000; i++) {
    const t = text(next, Math.floor(next() * 60));
    const rate = [4, 3.3, 2, 5.5][i & 3];
    const bounds: number[] = [];
    for (let at = 0; at < t.length; ) {
      const from = at + Math.floor(next() * 8);
      const to = Math.min(t.length, from + Math.floor(next() * 20));
      if (to <= from) break;
      bounds.push(from, to);
      at = to;
    }
    const before = { fractional: false };
    const after = { fractional: false };
    const start = next() < 0.5 ? 0 : 7;
    assert.equal(chargeRanges(t, bounds, start, rate, after), referenceRanges(t, bounds, start, rate, before), JSON.stringify({ t, bounds, rate }));
    assert.equal(after.fractional, before.fractional);
    assert.equal(chargeRange(t, 0, t.length, 0, rate), referenceRanges(t, [0, t.length], 0, rate));
    assert.equal(estimateTokens(t, rate), Math.ceil(referenceRanges(t, [0, t.length], 0, rate)));
  }
});

// Long runs (past the walk's table of shares), texts longer than the walk's chunk, pieces longer than its native copy's threshold.
const LONG_PIECES = [
  ' '.repeat(300),
  'a'.repeat(1000),
  'x'.repeat(255),
  '7'.repeat(513),
  '\n'.repeat(260),
  '-'.repeat(300),
  '\u0001'.repeat(280),
  '😀'.repeat(200),
  '漢'.repeat(70),
];

test('long texts, long runs, long ranges, every rate and start: the same charges as the walk before', () => {
  const next = seededRandom(2207);
  for (let i = 0; i < 400; i++) {
    let t = '';
    while (t.length < 200 + next() * 12_000) t += next() < 0.05 ? LONG_PIECES[Math.floor(next() * LONG_PIECES.length)] : PIECES[Math.floor(next() * 24)];
    // Mostly Latin script, code and digits (whole charges), a fraction-charged character now and then.
    if (next() < 0.3) t += text(next, 5);
    const rate = [4, 1, 0.5, 1.7, 7][i % 5];
    const bounds: number[] = [];
    for (let at = 0; at < t.length; ) {
      const from = at + Math.floor(next() * 100);
      const to = Math.min(t.length, from + Math.floor(next() * 6000));
      if (to <= from) break;
      bounds.push(from, to);
      at = to;
    }
    const start = [0, 7, 0.25][i % 3];
    const before = { fractional: false };
    const after = { fractional: false };
    assert.equal(chargeRanges(t, bounds, start, rate, after), referenceRanges(t, bounds, start, rate, before), `${t.length} characters, rate ${rate}`);
    assert.equal(after.fractional, before.fractional);
    assert.equal(estimateTokens(t, rate), Math.ceil(referenceRanges(t, [0, t.length], 0, rate)));
  }
});

test('long prompts: the sampled estimate and the facts’ promptTokens are what the walk before gives', () => {
  const next = seededRandom(7);
  const estimator = characterClassEstimator(4);
  for (let i = 0; i < 60; i++) {
    const t = text(next, 600 + Math.floor(next() * 6000));
    // The stripes' estimate through the walk before: the same bounds, walked by the reference.
    const expected = sampledEstimate(t, { estimate: (s: string) => Math.ceil(referenceRanges(s, [0, s.length], 0, 4)) });
    assert.equal(sampledEstimate(t, estimator), expected, `${t.length} characters`);
    const facts = requestFacts({ requestId: 'r', endpoint: 'completions', headers: {}, body: { model: 'm', prompt: t } }, {}) as RequestFacts;
    assert.equal(facts.promptTokens, expected);
  }
});
