// The watchdog: when the event loop stays blocked past a threshold (a plugin
// in an endless loop, a pathological regular expression, a synchronous
// disaster in a library), the process says so on stderr and dies, so that its
// supervisor (Kubernetes, systemd) restarts it. A stuck router that still
// holds its port is worse than a restarting one: it takes traffic and
// answers none. Envoy's watchdog does the same.
//
// A blocked thread can't run its own timers, so the watching happens in a
// worker thread: the main thread bumps a counter in a SharedArrayBuffer on a
// timer; the worker notices when the counter stops moving. From the worker,
// the log line is written synchronously to stderr (the main thread's logger
// can't flush) and the process is killed with SIGABRT (then SIGKILL if it
// survives): a non-zero exit however the main thread is stuck.
import { Worker } from 'node:worker_threads';

export interface WatchdogOptions {
  /** Longest the event loop may stay blocked, ms. Default 10,000. */
  readonly thresholdMs?: number;
  /** Included in the log line: which process this is. */
  readonly name?: string;
}

export interface Watchdog {
  /** Stops watching (graceful shutdown). */
  stop(): Promise<void>;
}

export const DEFAULT_WATCHDOG_MS = 10_000;

// Plain JavaScript, evaluated in the worker: nothing to compile or resolve.
const WORKER_SOURCE = `
const { workerData } = require('node:worker_threads');
const { writeSync } = require('node:fs');
const beats = new Int32Array(workerData.buffer);
const { thresholdMs, checkMs, name } = workerData;
let last = Atomics.load(beats, 0);
let lastMovedAt = Date.now();
const sleeper = new Int32Array(new SharedArrayBuffer(4));
setInterval(() => {
  const now = Date.now();
  const beat = Atomics.load(beats, 0);
  if (beat !== last) { last = beat; lastMovedAt = now; return; }
  const blockedMs = now - lastMovedAt;
  if (blockedMs < thresholdMs) return;
  let rss = 0;
  try { rss = process.memoryUsage.rss(); } catch {}
  const line = JSON.stringify({ level: 60, time: now, pid: process.pid, name, msg: 'watchdog: the event loop has been blocked for ' + blockedMs + ' ms (threshold ' + thresholdMs + ' ms); aborting so that the supervisor restarts the process', blockedMs, thresholdMs, rss });
  try { writeSync(2, line + '\\n'); } catch {}
  process.kill(process.pid, 'SIGABRT');
  Atomics.wait(sleeper, 0, 0, 2000);
  process.kill(process.pid, 'SIGKILL');
}, checkMs);
`;

export function startWatchdog(options: WatchdogOptions = {}): Watchdog {
  const thresholdMs = options.thresholdMs ?? DEFAULT_WATCHDOG_MS;
  if (!(thresholdMs > 0)) throw new Error(`watchdog threshold must be positive, not ${thresholdMs}`);
  // Beat and check often enough that a block is caught within ~1/4 of the threshold past it.
  const beatMs = Math.max(10, Math.min(1000, Math.floor(thresholdMs / 4)));
  const buffer = new SharedArrayBuffer(4);
  const beats = new Int32Array(buffer);
  const heart = setInterval(() => Atomics.add(beats, 0, 1), beatMs);
  heart.unref();
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { buffer, thresholdMs, checkMs: beatMs, name: options.name ?? 'switchyard' },
    resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 4 },
    stdout: false,
    stderr: false,
  });
  worker.unref();
  return {
    async stop() {
      clearInterval(heart);
      await worker.terminate();
    },
  };
}
