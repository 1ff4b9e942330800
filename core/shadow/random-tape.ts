// The live decision's random draw, kept for the shadow. A decision draws at
// most one number (a model version for a request without a conversation id,
// core/decide/model.ts); the shadow deciding the same request draws that
// same number, so a canary split identical in both policies lands the same.

export class RandomTape {
  #last = 0;
  #drawn = false;

  /** `random`, with its latest value kept. */
  wrap(random: () => number): () => number {
    return () => {
      const value = random();
      this.#last = value;
      this.#drawn = true;
      return value;
    };
  }

  /** The draw made since the last take(), if any. */
  take(): readonly number[] {
    if (!this.#drawn) return NONE;
    this.#drawn = false;
    return [this.#last];
  }
}

const NONE: readonly number[] = Object.freeze([]);
