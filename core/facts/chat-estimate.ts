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
// (CJK, Thai, ...) on, the rest is read in order, as before.
import { chargeRange, type CharacterClassEstimator } from '../tokens/estimate.ts';
import { messageSlot } from './message-slot.ts';
import type { RenderedChat } from './prompt.ts';

/** Remembered messages per estimator: one per slot (message-slot.ts), a newer one takes the slot. */
const SLOTS = 256;
/** Shorter messages cost less to read than to look up. */
const MIN_REMEMBERED_CHARS = 128;
/** A slot's share when the message has a fraction-charged character: never added. */
const FRACTIONAL = -1;

class Remembered {
  readonly contents: (string | undefined)[] = new Array(SLOTS).fill(undefined);
  readonly shares = new Float64Array(SLOTS);
}

const byEstimator = new WeakMap<CharacterClassEstimator, Remembered>();

/** estimator.estimate(chat.text), exactly, reading each remembered long message not again. */
export function chatEstimate(chat: RenderedChat, estimator: CharacterClassEstimator): number {
  let remembered = byEstimator.get(estimator);
  if (remembered === undefined) byEstimator.set(estimator, (remembered = new Remembered()));
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
    const headerEnd = at + headers[i].length - 1;
    const end = headerEnd + content.length + 2;
    tokens = chargeRange(text, at, headerEnd, tokens, rate, out);
    if (out.fractional) whole = false;
    at = end;
    if (!whole || content.length < MIN_REMEMBERED_CHARS) {
      tokens = chargeRange(text, headerEnd, end, tokens, rate, out);
      if (out.fractional) whole = false;
      continue;
    }
    const slot = messageSlot(content);
    if (remembered.contents[slot] === content) {
      const share = remembered.shares[slot];
      if (share !== FRACTIONAL) {
        tokens += share;
        continue;
      }
    }
    const before = tokens;
    tokens = chargeRange(text, headerEnd, end, tokens, rate, out);
    if (out.fractional) whole = false;
    remembered.contents[slot] = content;
    remembered.shares[slot] = whole ? tokens - before : FRACTIONAL;
  }
  return Math.ceil(tokens);
}
