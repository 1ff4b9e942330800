// One place that closes what was built, in order: each part registers how it
// closes as it is built, and close() runs them in the reverse order (what
// depends on a part closes before it), those marked `last` after everything
// else. A part that fails to close is logged and the rest still close; so is
// one that has not closed a few seconds past the grace it was given, so that
// shutdown never hangs on one part (docs/deploy.md, "Termination"). The
// same place holds what must follow each new live generation (swap
// listeners), so that the policy is listened to once.
import type { Generation } from '../decide/generation.ts';

interface Part {
  readonly name: string;
  readonly close: (graceMs: number) => unknown;
  readonly last: boolean;
}

/** How long past its grace a part may take to close before shutdown goes on without it. */
export const CLOSE_SLACK_MS = 5_000;

export class Lifetime {
  readonly #parts: Part[] = [];
  readonly #swaps: ((generation: Generation) => unknown)[] = [];
  #closing: Promise<void> | undefined;
  #following = false;

  constructor(
    private readonly log: { error(fields: object, message: string): void },
    private readonly slackMs = CLOSE_SLACK_MS,
  ) {}

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
        const waitedMs = graceMs + this.slackMs;
        if (!(await closedWithin(part.close(graceMs), waitedMs)))
          this.log.error({ part: part.name, waitedMs }, 'a part of the router did not close in time; the rest close without it');
      } catch (error) {
        this.log.error({ err: error, part: part.name }, 'closing a part of the router failed (the rest still close)');
        failure ??= error;
      }
    }
    if (failure !== undefined) throw failure;
  }
}

/** Whether `closing` settled within `ms` (a rejection is thrown as it is). */
async function closedWithin(closing: unknown, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(resolve, ms, false);
  });
  try {
    return await Promise.race([Promise.resolve(closing).then(() => true as const), late]);
  } finally {
    clearTimeout(timer);
  }
}
