// Real time run `speed` times faster: the engine model sees model time (a
// step of 6 ms takes 6 ms of clock time) while the wall clock moves 1/speed
// as far, so metrics such as time to first token read like a real engine's.
import type { Clock } from '../clock.ts';

export function scaledClock(speed: number): Clock {
  if (!(speed > 0) || !Number.isFinite(speed)) throw new RangeError(`speed must be a positive number, got ${speed}`);
  const wallStart = performance.now();
  const modelStart = performance.timeOrigin + wallStart;
  return {
    now: () => modelStart + (performance.now() - wallStart) * speed,
    schedule(delayMs, fn) {
      const wallDelay = delayMs / speed;
      if (wallDelay <= 0) {
        // setImmediate, not setTimeout(0): a timer costs ≥1 ms of wall time, which is
        // `speed` ms of model time added to every idle-to-busy start.
        const immediate = setImmediate(fn);
        return { cancel: () => clearImmediate(immediate) };
      }
      // Timers fire at whole milliseconds at best; the engine model catches up
      // by running the steps whose end has already passed back to back.
      const timer = setTimeout(fn, wallDelay);
      return { cancel: () => clearTimeout(timer) };
    },
  };
}
