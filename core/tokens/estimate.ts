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

/** Tokens per character of each class (runs of letters and digits are charged by length instead). */
const PER_CHAR: Record<number, number> = {
  [Kind.Ideograph]: 0.85,
  [Kind.Kana]: 0.75,
  [Kind.Hangul]: 0.9,
  [Kind.Thai]: 0.56,
  [Kind.OtherLetter]: 0.45,
  [Kind.Astral]: 1,
  [Kind.Symbol]: 1,
};

function kindOf(c: number): Kind {
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

/**
 * Estimated tokens of `text`. `latinCharsPerToken` (settings
 * `chars_per_token`, 4 by default) is the rate for words in Latin script;
 * the other classes are fixed.
 */
export function estimateTokens(text: string, latinCharsPerToken = 4): number {
  // A word of n letters: the first token is about 1.5 × the rate long (the
  // leading space rides with it), each further one about the rate.
  const wordRate = latinCharsPerToken * 1.5;
  let tokens = 0;
  let run = 0;
  let runKind = Kind.Space;
  const flush = () => {
    if (run === 0) return;
    if (runKind === Kind.Letter) tokens += 1 + Math.floor(Math.max(0, run - wordRate) / latinCharsPerToken + 0.5);
    else if (runKind === Kind.Digit) tokens += Math.ceil(run / 2); // Llama groups 3 digits, Qwen reads each
    else if (runKind === Kind.Punct) tokens += Math.ceil(run / 2); // `);`, `=>`, `",` are often one token
    else if (runKind === Kind.Space) tokens += run > 1 ? 1 : 0; // one space rides with the next word; indentation is a token
    else if (runKind === Kind.Newline) tokens += 1;
    run = 0;
  };
  for (let i = 0; i < text.length; i++) {
    const kind = kindOf(text.charCodeAt(i));
    const perChar = PER_CHAR[kind];
    if (perChar !== undefined) {
      flush();
      tokens += perChar;
      runKind = kind;
      continue;
    }
    if (kind !== runKind) {
      flush();
      runKind = kind;
    }
    run++;
  }
  flush();
  return Math.ceil(tokens);
}

/** The estimator the facts use where no tokenizer counts. */
export function characterClassEstimator(latinCharsPerToken = 4): TokenEstimator {
  return { estimate: (text) => estimateTokens(text, latinCharsPerToken) };
}
