// The token estimate of a long prompt, read from a bounded part of it. The
// estimator walks every character (a few nanoseconds each): 50 ms for an
// 8 MB prompt, a quarter of the router's time per request at 220 KB
// (docs/serving.md, "What a long prompt costs"). Up to ESTIMATE_FULL_CHARS
// the whole text is read; a longer one is read in STRIPES evenly spaced
// stripes (the first at the start, the last at the end), and their tokens
// per character are scaled to the whole length. Stripes are cut just
// before whitespace and estimated joined, as one text: no word is split at a
// cut, and no per-stripe rounding adds up. The result is deterministic: the
// same text always gets the same count.
import { chargeRanges, isCharacterClassEstimator } from '../tokens/estimate.ts';
import type { TokenEstimator } from './tokens.ts';

/** Prompts up to this many characters are estimated whole. */
export const ESTIMATE_FULL_CHARS = 8_192;
const STRIPES = 32;
const STRIPE_CHARS = ESTIMATE_FULL_CHARS / STRIPES;
/** How far a stripe's edge may move to reach whitespace. */
const EDGE_SEARCH_CHARS = 32;

function isBreak(c: number): boolean {
  return c === 32 || c === 10 || c === 13 || c === 9;
}

/** The first whitespace at or after `i`, within the search distance; `i` itself when there is none. */
function breakAtOrAfter(text: string, i: number, limit: number): number {
  const end = Math.min(limit, i + EDGE_SEARCH_CHARS);
  for (let j = i; j < end; j++) if (isBreak(text.charCodeAt(j))) return j;
  return i;
}

/** Estimated tokens of `text`, reading at most about ESTIMATE_FULL_CHARS of it. */
export function sampledEstimate(text: string, estimator: TokenEstimator): number {
  const n = text.length;
  if (n <= ESTIMATE_FULL_CHARS) return estimator.estimate(text);
  const step = (n - STRIPE_CHARS) / (STRIPES - 1);
  const bounds: number[] = [];
  let sampled = 0;
  let previousEnd = 0;
  for (let s = 0; s < STRIPES; s++) {
    const from = Math.floor(s * step);
    // Both edges move forward to whitespace (the first stripe starts at the text's start, the last ends at its end); stripes never overlap.
    const start = s === 0 ? 0 : Math.max(previousEnd, breakAtOrAfter(text, from, n));
    const end = s === STRIPES - 1 ? n : breakAtOrAfter(text, from + STRIPE_CHARS, n);
    if (end <= start) continue;
    bounds.push(start, end);
    sampled += end - start;
    previousEnd = end;
  }
  // The character-class estimate walks the stripes where they lie; another estimator is given them joined.
  const tokens = isCharacterClassEstimator(estimator)
    ? Math.ceil(chargeRanges(text, bounds, 0, estimator.latinCharsPerToken))
    : estimator.estimate(joined(text, bounds));
  return Math.ceil((tokens * n) / sampled);
}

function joined(text: string, bounds: readonly number[]): string {
  let sample = '';
  for (let r = 0; r < bounds.length; r += 2) sample += text.slice(bounds[r], bounds[r + 1]);
  return sample;
}
