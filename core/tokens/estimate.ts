// The token estimate used where no tokenizer is configured (docs/tokens.md).
// Characters ÷ 4 holds for English prose only: a Chinese character is close
// to a token of its own, code splits at every bracket. So the text is walked
// once, character by character, and each run of a character class is charged
// what real BPE vocabularies (Llama 3, Qwen 3) charge for it, rounded up so
// that dense scripts and code are not undercounted. No regular expression:
// the text is the client's, and one pass costs O(length).
import type { TokenEstimator } from '../facts/tokens.ts';

const enum Kind {
  Space,
  Newline,
  Letter,
  Digit,
  Punct,
  /** Chinese, Japanese kanji, and the fullwidth forms around them. */
  Ideograph,
  Kana,
  Hangul,
  Thai,
  /** Other alphabets (Cyrillic, Greek, Arabic, Hebrew, Indic...): short BPE pieces. */
  OtherLetter,
  /** Emoji and anything outside the Basic Multilingual Plane, one code unit at a time. */
  Astral,
  Symbol,
}

/** Tokens per character of each class; 0: charged per run instead (letters, digits, punctuation, spaces). */
const PER_CHAR = new Float64Array(12);
PER_CHAR[Kind.Ideograph] = 0.85;
PER_CHAR[Kind.Kana] = 0.75;
PER_CHAR[Kind.Hangul] = 0.9;
PER_CHAR[Kind.Thai] = 0.56;
PER_CHAR[Kind.OtherLetter] = 0.45;
PER_CHAR[Kind.Astral] = 1;
PER_CHAR[Kind.Symbol] = 1;

function slowKindOf(c: number): Kind {
  if (c < 128) {
    if (c === 32 || c === 9) return Kind.Space;
    if (c === 10 || c === 13) return Kind.Newline;
    if ((c >= 97 && c <= 122) || (c >= 65 && c <= 90)) return Kind.Letter;
    if (c >= 48 && c <= 57) return Kind.Digit;
    if (c < 32) return Kind.Symbol;
    return Kind.Punct;
  }
  if (c <= 0x024f) return c >= 0xc0 && c !== 0xd7 && c !== 0xf7 ? Kind.Letter : Kind.Symbol; // Latin-1 and Latin Extended letters
  if (c >= 0x4e00 && c <= 0x9fff) return Kind.Ideograph;
  if (c >= 0x3040 && c <= 0x30ff) return Kind.Kana;
  if (c >= 0xac00 && c <= 0xd7af) return Kind.Hangul;
  if (c >= 0xd800 && c <= 0xdfff) return Kind.Astral;
  if (c >= 0x0e00 && c <= 0x0e7f) return Kind.Thai;
  if ((c >= 0x3400 && c <= 0x4dbf) || (c >= 0xf900 && c <= 0xfaff) || (c >= 0x3000 && c <= 0x303f) || (c >= 0xff00 && c <= 0xffef)) return Kind.Ideograph;
  if ((c >= 0x1100 && c <= 0x11ff) || (c >= 0x3130 && c <= 0x318f)) return Kind.Hangul;
  if (c >= 0x0370 && c <= 0x1fff) return Kind.OtherLetter;
  return Kind.Symbol;
}

/** Every UTF-16 code unit's class, looked up: the walk is one table read a character. */
const KINDS = new Uint8Array(65536);
for (let c = 0; c < 65536; c++) KINDS[c] = slowKindOf(c);

/** Tokens of a run of `run` characters of a run-charged class. */
function runTokens(kind: number, run: number, latinCharsPerToken: number, wordRate: number): number {
  if (kind === Kind.Letter) return 1 + Math.floor(Math.max(0, run - wordRate) / latinCharsPerToken + 0.5);
  if (kind === Kind.Digit || kind === Kind.Punct) return Math.ceil(run / 2); // Llama groups 3 digits, Qwen reads each; `);`, `=>`, `",` are often one token
  if (kind === Kind.Space) return run > 1 ? 1 : 0; // one space rides with the next word; indentation is a token
  if (kind === Kind.Newline) return 1;
  return 0;
}

/**
 * Estimated tokens of `text`. `latinCharsPerToken` (settings
 * `chars_per_token`, 4 by default) is the rate for words in Latin script;
 * the other classes are fixed.
 */
export function estimateTokens(text: string, latinCharsPerToken = 4): number {
  return Math.ceil(chargeRange(text, 0, text.length, 0, latinCharsPerToken));
}

/**
 * The charges of `text[from, to)`, added one by one to `tokens`: the
 * estimate before rounding up. Walking a text in consecutive ranges gives
 * exactly the whole walk's sum when each range ends a run of its class.
 * `out.fractional` says whether a charge was a fraction of a token (a
 * script charged per character): until one is, the sum is a whole number,
 * and sums of ranges add exactly (core/facts/chat-estimate.ts relies on it).
 */
export function chargeRange(text: string, from: number, to: number, tokens: number, latinCharsPerToken: number, out?: { fractional: boolean }): number {
  ONE_RANGE[0] = from;
  ONE_RANGE[1] = to;
  return chargeRanges(text, ONE_RANGE, tokens, latinCharsPerToken, out);
}
/** chargeRange's one range (the walk is synchronous: nothing else uses it meanwhile). */
const ONE_RANGE = [0, 0];

/**
 * The charges of the ranges `text[bounds[0], bounds[1])`,
 * `text[bounds[2], bounds[3])`, ... walked as one text (a run goes on across
 * the joins), without making that text: the sampled estimate's stripes.
 */
export function chargeRanges(text: string, bounds: readonly number[], tokens: number, latinCharsPerToken: number, out?: { fractional: boolean }): number {
  // A word of n letters: the first token is about 1.5 × the rate long (the
  // leading space rides with it), each further one about the rate.
  const wordRate = latinCharsPerToken * 1.5;
  let run = 0;
  let runKind = -1;
  let fractional = false;
  for (let r = 0; r + 1 < bounds.length; r += 2) {
    // Bounded by the text's length too, the loop is one V8 can prove in range: charCodeAt's and the table's checks go,
    // and a walk of 8,192 characters took a third of the time (the ranges are within the text: the same charges).
    const to = Math.min(bounds[r + 1], text.length);
    for (let i = bounds[r]; i < to; i++) {
      const kind = KINDS[text.charCodeAt(i)];
      if (kind === runKind) {
        run++;
        continue;
      }
      if (run > 0) tokens += runTokens(runKind, run, latinCharsPerToken, wordRate);
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
  if (run > 0) tokens += runTokens(runKind, run, latinCharsPerToken, wordRate);
  if (out !== undefined) out.fractional = fractional;
  return tokens;
}

/** The estimator the facts use where no tokenizer counts. */
export function characterClassEstimator(latinCharsPerToken = 4): CharacterClassEstimator {
  const estimator = { estimate: (text: string) => estimateTokens(text, latinCharsPerToken), latinCharsPerToken };
  characterClass.add(estimator);
  return estimator;
}

/** The estimators made here: another object with a rate may count otherwise. */
const characterClass = new WeakSet<TokenEstimator>();

/** The character-class estimator, with its rate: what lets the facts sum a prompt by parts (core/facts/chat-estimate.ts). */
export interface CharacterClassEstimator extends TokenEstimator {
  readonly latinCharsPerToken: number;
}

export function isCharacterClassEstimator(estimator: TokenEstimator): estimator is CharacterClassEstimator {
  return characterClass.has(estimator);
}
