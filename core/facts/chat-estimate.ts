// The token estimate of a chat prompt short enough to be read whole
// (sampled-estimate.ts), message by message, with each long message's
// share remembered: a shared system prompt and a conversation's earlier
// turns are not read again on every request. The count is the one the
// rendered prompt read at once gives. A rendered message `<|role|>\n…\n`
// ends a run of the estimate's character classes where the next begins, so
// the prompt's charges are its messages' charges in order; and while every
// charge so far was a whole token (Latin script, code, digits, punctuation)
// the running sum is a whole number, to which a remembered share adds
// exactly. From a message of a script charged in fractions of a token
// (CJK, Thai, ...) on, the sum is a float that depends on the order of its
// charges: such a message's walk is a function of the sum it starts from,
// so it is remembered with that start and reused only from the same one (a
// shared document first in the chat starts from its header's charge every
// time).
import { chargeRange, type CharacterClassEstimator } from '../tokens/estimate.ts';
import { MessageSlots } from './message-slot.ts';
import type { RenderedChat } from './prompt.ts';

/** Remembered messages per estimator, two entries a set (message-slot.ts). */
const ENTRIES = 256;
/** Shorter messages cost less to read than to look up. */
const MIN_REMEMBERED_CHARS = 128;
/** An entry's share when the message has a fraction-charged character: never added (the sums below are used instead). */
const FRACTIONAL = -1;

/** Role headers (`<|user|>`) whose charge is remembered, at most, each up to HEADER_CHARS long: the map starts afresh when full. */
const HEADERS = 64;
const HEADER_CHARS = 64;

class Remembered {
  readonly slots = new MessageSlots(ENTRIES);
  /**
   * A role header's charge (its `\n` left to the content), when every
   * character of it is charged a whole token: a handful of roles come again
   * in every request, and a walk of ten characters costs more than a lookup.
   */
  readonly headerShares = new Map<string, number>();
  /** A FRACTIONAL entry's walk: the sum it started from and the sum it ended at. */
  readonly fromSums = new Float64Array(ENTRIES);
  readonly toSums = new Float64Array(ENTRIES);
}

const byEstimator = new WeakMap<CharacterClassEstimator, Remembered>();

/** estimator.estimate(chat.text), exactly, reading each remembered long message not again. */
export function chatEstimate(chat: RenderedChat, estimator: CharacterClassEstimator): number {
  let remembered = byEstimator.get(estimator);
  if (remembered === undefined) byEstimator.set(estimator, (remembered = new Remembered()));
  const { slots, fromSums, toSums, headerShares } = remembered;
  const { text, contents, headers } = chat;
  const rate = estimator.latinCharsPerToken;
  const out = { fractional: false };
  let tokens = 0;
  // Every charge so far a whole token: `tokens` is an exact whole number.
  let whole = true;
  let at = 0;
  for (let i = 0; i < contents.length; i++) {
    const content = contents[i];
    // `<|role|>`, then `\n` + content + `\n`: each part ends a run (`>` then a line end; a line end then `<`).
    // While the sum is whole, a remembered header's share adds exactly, as a long message's does.
    const headerEnd = at + headers[i].length - 1;
    const end = headerEnd + content.length + 2;
    const header = headers[i];
    const headerShare = whole ? headerShares.get(header) : undefined;
    if (headerShare !== undefined) tokens += headerShare;
    else {
      const before = tokens;
      tokens = chargeRange(text, at, headerEnd, tokens, rate, out);
      if (out.fractional) whole = false;
      else if (whole && header.length <= HEADER_CHARS) {
        if (headerShares.size >= HEADERS) headerShares.clear();
        headerShares.set(header, tokens - before);
      }
    }
    at = end;
    if (content.length < MIN_REMEMBERED_CHARS) {
      tokens = chargeRange(text, headerEnd, end, tokens, rate, out);
      if (out.fractional) whole = false;
      continue;
    }
    let entry = slots.find(content);
    const share = entry >= 0 ? slots.values[entry] : FRACTIONAL;
    if (entry >= 0 && share !== FRACTIONAL) {
      if (whole) {
        tokens += share;
        continue;
      }
      // After a fraction-charged charge the sum is a float: walked, the whole share kept for the chats where it comes first.
      tokens = chargeRange(text, headerEnd, end, tokens, rate, out);
      continue;
    }
    // The same walk from the same sum: the same float, to the last bit.
    if (entry >= 0 && fromSums[entry] === tokens) {
      tokens = toSums[entry];
      whole = false;
      continue;
    }
    const before = tokens;
    tokens = chargeRange(text, headerEnd, end, tokens, rate, out);
    const fractional = !whole || out.fractional;
    if (out.fractional) whole = false;
    if (entry < 0) entry = slots.take(content);
    slots.values[entry] = fractional ? FRACTIONAL : tokens - before;
    fromSums[entry] = before;
    toSums[entry] = tokens;
  }
  return Math.ceil(tokens);
}
