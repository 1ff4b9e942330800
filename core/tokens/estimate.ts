// The token estimate used where no tokenizer is configured (docs/tokens.md).
// Characters ÷ 4 holds for English prose only: a Chinese character is close
// to a token of its own, code splits at every bracket. So the text is walked
// once, character by character, and each run of a character class is charged
// what real BPE vocabularies (Llama 3, Qwen 3) charge for it, rounded up so
// that dense scripts and code are not undercounted. No regular expression:
// the text is the client's, and one pass costs O(length).
import type { TokenEstimator } from '../facts/tokens.ts';

/** The classes charged whole tokens come first, the ones charged a fraction of a token a character last (FIRST_FRACTIONAL). */
const enum Kind {
  Space,
  Newline,
  Letter,
  Digit,
  Punct,
  /** Emoji and anything outside the Basic Multilingual Plane, one code unit at a time. */
  Astral,
  Symbol,
  /** Chinese, Japanese kanji, and the fullwidth forms around them. */
  Ideograph,
  Kana,
  Hangul,
  Thai,
  /** Other alphabets (Cyrillic, Greek, Arabic, Hebrew, Indic...): short BPE pieces. */
  OtherLetter,
}
const FIRST_FRACTIONAL = Kind.Ideograph;
/** No class: before the first character. */
const NO_KIND = 255;

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
function runTokens(kind: number, run: number, latinCharsPerToken: number): number {
  // A word of n letters: the first token is about 1.5 × the rate long (the
  // leading space rides with it), each further one about the rate.
  const wordRate = latinCharsPerToken * 1.5;
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
 *
 * Two walks, the same charges. Until a character of a fraction-charged class
 * (CJK, Thai, other alphabets), every charge is a whole token, and whole
 * numbers add exactly in any grouping: each character adds its share of its
 * run's charge (a table read), and the walk has no branch that depends on
 * where runs end (in prose, every few characters: those mispredicted branches
 * were most of its time). From such a character on, the float sum depends on
 * the order charges are added in, so each run is charged when it ends, as the
 * estimate was defined. The text is read in chunks copied natively into a
 * typed array: reading it there costs a fraction of String#charCodeAt.
 */
export function chargeRanges(text: string, bounds: readonly number[], tokens: number, latinCharsPerToken: number, out?: { fractional: boolean }): number {
  const deltas = Number.isInteger(tokens) && Math.abs(tokens) <= MAX_WHOLE_START ? wholeDeltas(latinCharsPerToken) : undefined;
  if (deltas === undefined) return exactWalk(text, bounds, 0, bounds.length > 1 ? bounds[0] : 0, tokens, latinCharsPerToken, out);
  const walk = startWalk(RANGES_WALK);
  for (let r = 0; r + 1 < bounds.length; r += 2) {
    const to = Math.min(bounds[r + 1], text.length);
    const stopped = walkWhole(text, Math.max(0, bounds[r]), to, walk, deltas, latinCharsPerToken);
    // A fraction-charged character: the run before it is charged whole already; from it on, the exact walk.
    if (stopped < to) return exactWalk(text, bounds, r, stopped, tokens + walk.shares, latinCharsPerToken, out);
  }
  if (out !== undefined) out.fractional = false;
  return tokens + walk.shares;
}
/** chargeRanges' walk (the walk is synchronous: nothing else uses it meanwhile). */
const RANGES_WALK: WholeWalk = { shares: 0, run: 0, runKind: 0 };

/** Where a walk of whole charges stands between pieces of text (walkWhole). */
export interface WholeWalk {
  /** The sum of the characters' shares so far, a whole number. */
  shares: number;
  /** The run the last character is in: its length so far and its class. */
  run: number;
  runKind: number;
}

/** `walk` set to where a walk begins: no share, no run. */
export function startWalk(walk: WholeWalk): WholeWalk {
  walk.shares = 0;
  walk.run = 0;
  walk.runKind = NO_KIND;
  return walk;
}

/**
 * Adds the shares of text[from, to) to `walk`, its run going on from the
 * last piece walked: each character adds its share of its run's charge (a
 * table read), with no branch on where runs end. Stops at a character
 * charged a fraction of a token, and returns where: `to` when there is none.
 * `deltas` is wholeDeltas(latinCharsPerToken).
 */
export function walkWhole(text: string, from: number, to: number, walk: WholeWalk, deltas: Int32Array, latinCharsPerToken: number): number {
  let { shares, run, runKind } = walk;
  // The tables as locals, as in exactWalk: read from the module's bindings here, the walk took 1.2x the time of the loop inline in chargeRanges before.
  const kinds = KINDS;
  const codes = CODES;
  for (; from < to; from += CHUNK) {
    const n = copyCodes(text, from, Math.min(to, from + CHUNK));
    for (let i = 0; i < n; i++) {
      const kind = kinds[codes[i]];
      // run + 1 if the class goes on, else 1, without a branch: (kind ^ runKind) - 1 is negative exactly when the two are equal.
      run = (run & (((kind ^ runKind) - 1) >> 31)) + 1;
      runKind = kind;
      if (kind >= FIRST_FRACTIONAL) {
        walk.shares = shares;
        return from + i;
      }
      // Summed as integers: an integer add a character, not a float add's latency.
      shares = (shares + (run < DELTA_RUN ? deltas[(kind << DELTA_RUN_BITS) | run] : runDelta(kind, run, latinCharsPerToken))) | 0;
    }
  }
  walk.shares = shares;
  walk.run = run;
  walk.runKind = runKind;
  return to;
}

/** The class of a UTF-16 code unit: two characters of one class make one run. */
export function charClass(code: number): number {
  return KINDS[code];
}

/**
 * The walk that charges each run when it ends, from text[at] in range
 * `r` (at a run's start): the estimate as defined, whose float sum the
 * order of the charges decides.
 */
function exactWalk(
  text: string,
  bounds: readonly number[],
  r: number,
  at: number,
  tokens: number,
  latinCharsPerToken: number,
  out?: { fractional: boolean },
): number {
  let sum = tokens;
  let run = 0;
  let runKind = NO_KIND;
  let fractional = false;
  // The tables as locals, the sum not in a parameter: CJK text walked 0.78x the time in bench:facts (docs/tokens.md).
  const kinds = KINDS;
  const codes = CODES;
  const perChars = PER_CHAR;
  for (; r + 1 < bounds.length; r += 2) {
    const to = Math.min(bounds[r + 1], text.length);
    for (let from = Math.max(0, at); from < to; from += CHUNK) {
      const n = copyCodes(text, from, Math.min(to, from + CHUNK));
      for (let i = 0; i < n; i++) {
        const kind = kinds[codes[i]];
        if (kind === runKind) {
          run++;
          continue;
        }
        if (run > 0) sum += runTokens(runKind, run, latinCharsPerToken);
        const perChar = perChars[kind];
        if (perChar > 0) {
          sum += perChar;
          fractional ||= perChar !== 1;
          run = 0;
          runKind = NO_KIND;
        } else {
          run = 1;
          runKind = kind;
        }
      }
    }
    if (r + 3 < bounds.length) at = bounds[r + 2];
  }
  if (run > 0) sum += runTokens(runKind, run, latinCharsPerToken);
  if (out !== undefined) out.fractional = fractional;
  return sum;
}

/** Characters copied and walked at a time. */
const CHUNK = 4096;
const CODES = new Uint16Array(CHUNK);
const CODE_BYTES = Buffer.from(CODES.buffer, CODES.byteOffset, CODES.byteLength);
/** Shorter pieces are copied a character at a time: a native call costs more than that. */
const NATIVE_COPY_CHARS = 64;

/** text[from, to) (at most CHUNK characters) into CODES, as UTF-16 code units (lone surrogates too); their number. */
function copyCodes(text: string, from: number, to: number): number {
  if (to - from < NATIVE_COPY_CHARS) {
    for (let i = from; i < to; i++) CODES[i - from] = text.charCodeAt(i);
    return to - from;
  }
  return CODE_BYTES.write(from === 0 && to === text.length ? text : text.slice(from, to), 'utf16le') >>> 1;
}

/** What the `run`-th character of a run adds to its charge: summed over a run, its runTokens (whole-charged classes only). */
function runDelta(kind: number, run: number, latinCharsPerToken: number): number {
  if (kind === Kind.Astral || kind === Kind.Symbol) return PER_CHAR[kind];
  return runTokens(kind, run, latinCharsPerToken) - (run > 1 ? runTokens(kind, run - 1, latinCharsPerToken) : 0);
}

/** Runs this long or longer have their characters' shares computed, not looked up (a run is rarely so long). */
const DELTA_RUN_BITS = 8;
const DELTA_RUN = 1 << DELTA_RUN_BITS;
/** From a start this size or smaller, sums of whole numbers stay exact. */
const MAX_WHOLE_START = 2 ** 40;

/** runDelta of every whole-charged class and run shorter than DELTA_RUN, by rate (a few: one per policy's settings). */
const deltasByRate = new Map<number, Int32Array>();
const MAX_RATES = 8;

/** The shares for a rate (0 or 1 token each); undefined below one character a token, where a letter's share could be more. */
export function wholeDeltas(latinCharsPerToken: number): Int32Array | undefined {
  let deltas = deltasByRate.get(latinCharsPerToken);
  if (deltas !== undefined) return deltas;
  if (!(latinCharsPerToken >= 1)) return undefined;
  deltas = new Int32Array(FIRST_FRACTIONAL << DELTA_RUN_BITS);
  for (let kind = 0; kind < FIRST_FRACTIONAL; kind++) {
    for (let run = 1; run < DELTA_RUN; run++) deltas[(kind << DELTA_RUN_BITS) | run] = runDelta(kind, run, latinCharsPerToken);
  }
  if (deltasByRate.size >= MAX_RATES) deltasByRate.clear();
  deltasByRate.set(latinCharsPerToken, deltas);
  return deltas;
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
