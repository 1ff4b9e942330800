// One place that closes what was built, in order: each part registers how it
// closes as it is built, and close() runs them in the reverse order (what
// depends on a part closes before it), those marked `last` after everything
// else. A part that fails to close is logged and the rest still close. The
// same place holds what must follow each new live generation (swap
// listeners), so that the policy is listened to once.
import type { Generation } from '../decide/generation.ts';

interface Part {
  readonly name: string;
  readonly close: (graceMs: number) => unknown;
  readonly last: boolean;
}

export class Lifetime {
  readonly #parts: Part[] = [];
  readonly #swaps: ((generation: Generation) => unknown)[] = [];
  #closing: Promise<void> | undefined;
  #following = false;

  constructor(private readonly log: { error(fields: object, message: string): void }) {}

  /** Registers how a part just built closes; `graceMs` is what close() was given. `last`: after every other part (the watchdog watches the shutdown too). */
  own(name: string, close: (graceMs: number) => unknown, options: { last?: boolean } = {}): void {
    if (this.#closing) throw new Error(`${name} was built while the router is closing`);
    this.#parts.push({ name, close, last: options.last === true });
  }

  /** Runs `listener` on each new live generation, after the listeners registered before it. */
  onSwap(listener: (generation: Generation) => unknown): void {
    this.#swaps.push(listener);
  }

  /** Listens to `policy`'s swaps once, for every onSwap listener. */
  follow(policy: { onSwap?(listener: (generation: Generation) => void): unknown }): void {
    if (this.#following) return;
    this.#following = true;
    policy.onSwap?.((generation) => void this.#swapped(generation));
  }

  async #swapped(generation: Generation): Promise<void> {
    for (const listener of this.#swaps) {
      try {
        await listener(generation);
      } catch (error) {
        this.log.error({ err: error }, 'applying the new policy failed in part (the rest was applied)');
      }
    }
  }

  /** Closes every part once, in order; a second call waits for the first. Rejects, once all are closed, with the first failure. */
  close(graceMs: number): Promise<void> {
    this.#closing ??= this.#closeAll(graceMs);
    return this.#closing;
  }

  async #closeAll(graceMs: number): Promise<void> {
    const reversed = [...this.#parts].reverse();
    let failure: unknown;
    for (const part of [...reversed.filter((p) => !p.last), ...reversed.filter((p) => p.last)]) {
      try {
        await part.close(graceMs);
      } catch (error) {
        this.log.error({ err: error, part: part.name }, 'closing a part of the router failed (the rest still close)');
        failure ??= error;
      }
    }
    if (failure !== undefined) throw failure;
  }
}
