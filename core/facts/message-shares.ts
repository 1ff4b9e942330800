// A long message's running sum of whole charges, remembered, so that the
// sampled estimate (sampled-estimate.ts) of a prompt that holds it again
// reads a few characters of each stripe instead of all of them.
//
// Walked with no fraction-charged character (core/tokens/estimate.ts,
// walkWhole), every character adds a whole share of its run's charge, and
// whole numbers add exactly in any grouping. A stripe's walk and the whole
// message's walk give each character the same share from the first run
// that begins inside the stripe on: the shares from there to the stripe's
// end are the message's running sum at the end less its sum there. So a
// stripe costs the walk of its first run, and of the two pieces from the
// nearest remembered sums (every STEP characters) to where the difference is
// taken: about STEP + a word's characters instead of 256, the same sum.
import { charClass, startWalk, walkWhole, type CharacterClassEstimator, type WholeWalk } from '../tokens/estimate.ts';
import { MessageSlots } from './message-slot.ts';

const STEP_BITS = 5;
/** Characters between remembered sums. */
const STEP = 1 << STEP_BITS;

/** A whole-charged text's walk at every STEP-th character: the shares before it and the run it ends. */
export class MessageShares {
  readonly text: string;
  readonly #shares: Int32Array;
  readonly #runs: Int32Array;
  readonly #runKinds: Uint8Array;
  readonly #deltas: Int32Array;
  readonly #rate: number;
  /** Scratch walks for the two running sums add() takes the difference of. */
  readonly #from: WholeWalk = startWalk({ shares: 0, run: 0, runKind: 0 });
  readonly #to: WholeWalk = startWalk({ shares: 0, run: 0, runKind: 0 });

  private constructor(text: string, deltas: Int32Array, rate: number) {
    const points = (text.length >> STEP_BITS) + 1;
    this.text = text;
    this.#shares = new Int32Array(points);
    this.#runs = new Int32Array(points);
    this.#runKinds = new Uint8Array(points);
    this.#deltas = deltas;
    this.#rate = rate;
  }

  /** The running sums of `text`, or undefined when it has a fraction-charged character (its sums depend on the order they are added in). */
  static of(text: string, deltas: Int32Array, rate: number): MessageShares | undefined {
    const index = new MessageShares(text, deltas, rate);
    const walk = startWalk({ shares: 0, run: 0, runKind: 0 });
    for (let p = 0; p < index.#shares.length; p++) {
      index.#shares[p] = walk.shares;
      index.#runs[p] = walk.run;
      index.#runKinds[p] = walk.runKind;
      const from = p << STEP_BITS;
      const to = Math.min(text.length, from + STEP);
      if (walkWhole(text, from, to, walk, deltas, rate) < to) return undefined;
    }
    return index;
  }

  /** Adds the shares of text[from, to) to `walk`, its run going on from the piece walked before: what walkWhole adds. */
  add(walk: WholeWalk, from: number, to: number): void {
    const text = this.text;
    // The stripe's first run may have begun before it (or goes on from the piece before): walked.
    let start = from + 1;
    while (start < to && charClass(text.charCodeAt(start)) === charClass(text.charCodeAt(start - 1))) start++;
    walkWhole(text, from, start, walk, this.#deltas, this.#rate);
    if (start >= to) return;
    // A run begins at `start`: from there on, the message's own walk.
    this.#walkTo(start, this.#from);
    this.#walkTo(to, this.#to);
    walk.shares = (walk.shares + this.#to.shares - this.#from.shares) | 0;
    walk.run = this.#to.run;
    walk.runKind = this.#to.runKind;
  }

  /** `walk` set to the message's own walk of text[0, at). */
  #walkTo(at: number, walk: WholeWalk): void {
    const p = at >> STEP_BITS;
    walk.shares = this.#shares[p];
    walk.run = this.#runs[p];
    walk.runKind = this.#runKinds[p];
    walkWhole(this.text, p << STEP_BITS, at, walk, this.#deltas, this.#rate);
  }
}

/** Messages this long or longer are worth remembering: a stripe is 256 characters. */
export const MIN_SHARED_CHARS = 2_048;
/**
 * Longer ones are read from the sample each time: a message's sums cost one walk of it
 * (at most 4 samples' worth, the second time it comes), and 64 entries keep at most
 * 2 M characters alive, their sums 0.3 B a character. (Up to 262,144 characters in 16
 * entries, bench:facts' 16 documents of 220 KB took each other's entries and were
 * walked whole again and again: 1.4x the time.)
 */
export const MAX_SHARED_CHARS = 32_768;
const ENTRIES = 64;
/** An entry's state: seen once (its sums are made the second time: a message that never comes again costs no walk), or no sums (a fraction-charged character). */
const SEEN_ONCE = 0;
const NO_SUMS = 1;
const HAS_SUMS = 2;

class Remembered {
  readonly slots = new MessageSlots(ENTRIES);
  readonly sums: (MessageShares | undefined)[] = new Array(ENTRIES).fill(undefined);
}
const byEstimator = new WeakMap<CharacterClassEstimator, Remembered>();

/**
 * The running sums of `text` (MIN_SHARED_CHARS to MAX_SHARED_CHARS long) if it was seen
 * before and has only whole charges. Making them walks the whole message: only while
 * `makes.left` > 0, which a making takes one from (the sampled estimate allows one a
 * prompt, so that a chat of many long messages costs at most one message's walk more
 * than its sample); else they are made another time.
 */
export function messageShares(text: string, estimator: CharacterClassEstimator, deltas: Int32Array, makes: { left: number }): MessageShares | undefined {
  let remembered = byEstimator.get(estimator);
  if (remembered === undefined) byEstimator.set(estimator, (remembered = new Remembered()));
  const { slots, sums } = remembered;
  const found = slots.find(text);
  if (found < 0) {
    const entry = slots.take(text);
    slots.values[entry] = SEEN_ONCE;
    sums[entry] = undefined;
    return undefined;
  }
  if (slots.values[found] === SEEN_ONCE) {
    if (makes.left <= 0) return undefined;
    makes.left--;
    sums[found] = MessageShares.of(text, deltas, estimator.latinCharsPerToken);
    slots.values[found] = sums[found] === undefined ? NO_SUMS : HAS_SUMS;
  }
  return sums[found];
}
