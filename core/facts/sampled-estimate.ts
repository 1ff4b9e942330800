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
import {
  chargeRanges,
  isCharacterClassEstimator,
  startWalk,
  walkWhole,
  wholeDeltas,
  type CharacterClassEstimator,
  type WholeWalk,
} from '../tokens/estimate.ts';
import { MAX_SHARED_CHARS, MIN_SHARED_CHARS, messageShares, type MessageShares } from './message-shares.ts';
import type { RenderedChat } from './prompt.ts';
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

/** Estimated tokens of `text` (`chat`'s text when given: its long messages' sums may be remembered), reading at most about ESTIMATE_FULL_CHARS of it. */
export function sampledEstimate(text: string, estimator: TokenEstimator, chat?: RenderedChat): number {
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
    ? Math.ceil(chat === undefined ? chargeRanges(text, bounds, 0, estimator.latinCharsPerToken) : chargeChatRanges(chat, bounds, estimator))
    : estimator.estimate(joined(text, bounds));
  return Math.ceil((tokens * n) / sampled);
}

/**
 * chargeRanges(chat.text, bounds, 0, rate), the same sum, with the stripes'
 * parts inside long messages seen before taken from their running sums
 * (message-shares.ts): a shared document or a conversation's earlier turns
 * are not walked again stripe by stripe.
 */
function chargeChatRanges(chat: RenderedChat, bounds: readonly number[], estimator: CharacterClassEstimator): number {
  const { text, headers, contents } = chat;
  const rate = estimator.latinCharsPerToken;
  const deltas = wholeDeltas(rate);
  if (deltas === undefined) return chargeRanges(text, bounds, 0, rate);
  const walk = startWalk(CHAT_WALK);
  // The message whose content is next in the text, and where that content lies (each message is `<|role|>\n` + content + `\n`).
  let m = -1;
  let contentStart = 0;
  let contentEnd = 0;
  let shares: MessageShares | undefined;
  // Whether the message's sums were asked for: only of a message a stripe reaches into, once.
  let asked = false;
  const makes = CHAT_MAKES;
  makes.left = 1;
  for (let r = 0; r + 1 < bounds.length; r += 2) {
    let at = bounds[r];
    const to = Math.min(bounds[r + 1], text.length);
    while (at < to) {
      while (at >= contentEnd && m + 1 < contents.length) {
        m++;
        contentStart = contentEnd + (m === 0 ? 0 : 1) + headers[m].length;
        contentEnd = contentStart + contents[m].length;
        shares = undefined;
        asked = false;
      }
      const inContent = at >= contentStart && at < contentEnd;
      if (inContent && !asked) {
        asked = true;
        const length = contents[m].length;
        if (length >= MIN_SHARED_CHARS && length <= MAX_SHARED_CHARS) shares = messageShares(contents[m], estimator, deltas, makes);
      }
      // Up to the next content's start, or through the content: with its sums if it has them, else walked.
      const end = at < contentStart ? Math.min(to, contentStart) : Math.min(to, contentEnd > at ? contentEnd : to);
      if (shares !== undefined && inContent) {
        shares.add(walk, at - contentStart, end - contentStart);
      } else {
        const stopped = walkWhole(text, at, end, walk, deltas, rate);
        // A fraction-charged character: from it on, the walk chargeRanges takes (its exact walk, in order).
        if (stopped < end) return chargeRanges(text, [stopped, to, ...bounds.slice(r + 2)], walk.shares, rate);
      }
      at = end;
    }
  }
  return walk.shares;
}
/** chargeChatRanges' walk, and the sums it may make (synchronous: nothing else uses them meanwhile). */
const CHAT_WALK: WholeWalk = { shares: 0, run: 0, runKind: 0 };
const CHAT_MAKES = { left: 0 };

function joined(text: string, bounds: readonly number[]): string {
  let sample = '';
  for (let r = 0; r < bounds.length; r += 2) sample += text.slice(bounds[r], bounds[r + 1]);
  return sample;
}
