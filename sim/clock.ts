// One clock interface for the engine model: real time in the emulator server,
// virtual time in the simulator. Time is in milliseconds.

export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  now(): number;
  /** Runs `fn` once, `delayMs` from now. */
  schedule(delayMs: number, fn: () => void): TimerHandle;
}

export const realClock: Clock = {
  now: () => performance.timeOrigin + performance.now(),
  schedule(delayMs, fn) {
    const timer = setTimeout(fn, Math.max(0, delayMs));
    return { cancel: () => clearTimeout(timer) };
  },
};
