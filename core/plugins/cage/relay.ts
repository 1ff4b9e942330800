// The relay (isolation: process): a worker thread of the router that plays
// the plugin worker's part of the shared-memory protocol (wire.ts) for the
// router's thread, and carries each call over a pipe to the plugin's own
// process (child.ts), where the plugin runs. Mid-call asks (a request's
// hashes or token ids, ctx.kvIndex lookups) come back the same way and are
// answered by the router's thread in shared memory, as with a worker cage.
// The router's thread keeps its synchronous, budgeted wait; this thread only
// copies bytes. It runs no plugin code, and everything the plugin process
// sends is bounded here: a frame out of bounds ends that process.
import { spawn } from 'node:child_process';
import { deserialize } from 'node:v8';
import { parentPort, workerData } from 'node:worker_threads';
import type { ProcessInit } from './child.ts';
import { changed, F_ANSWER, F_ASK, F_ASK_REPLY, F_CALL, F_INIT, F_LOAD, F_MEMORY, F_MESSAGE, F_WORKER_EXIT, type Frame, FrameReader, frame } from './frames.ts';
import {
  ANSWER_AT,
  ANSWER_BYTES,
  ANSWER_REGION,
  ANSWER_SEQ,
  ANSWERED,
  ASK_TOKENS,
  CALL_AT,
  CALL_BYTES,
  CALL_REGION,
  CALL_SEQ,
  CALLING,
  DATA_GIVEN,
  EXTERNAL_MB,
  HEAP_MB,
  NEEDS_DATA,
  ROUTER_WAITING,
  SIDE_AT,
  SIDE_BYTES,
  SIDE_COUNT,
  SIDE_KIND,
  SIDE_OP,
  SIDE_REGION,
  STATE,
} from './wire.ts';

interface RelayData {
  readonly shared: SharedArrayBuffer;
  /** How the plugin worker starts: it does so at once, ready for a module (a spare, plugin-process.ts). */
  readonly init: ProcessInit;
  /** The plugin process's entry (child.ts, bundled). */
  readonly childScript: string;
}

/** The last bytes of the plugin process's stderr kept: V8's own words when it aborts. */
const STDERR_TAIL = 2048;
/** After the plugin process exits, how long its last frames may take to arrive, ms. */
const DRAIN_MS = 200;

const port = parentPort!;
const data = workerData as RelayData;
const ctrl = new Int32Array(data.shared, 0, 16);
const bytes = new Uint8Array(data.shared);
const reader = new FrameReader();
/** The sequence of the last call forwarded. */
let forwarded = Atomics.load(ctrl, CALL_SEQ);
/** The plugin process's ask the router's thread is answering: its tag, 0 when none. */
let askTag = 0;
let stderrTail = '';
let workerExit: { code: number; message?: string; errorCode?: string } | undefined;
let over = false;

const child = spawn(process.execPath, ['--max-old-space-size=64', data.childScript], {
  // The router's environment holds its secrets (the admin token): none of it goes in, so /proc/self/environ of
  // the plugin's process is empty too.
  env: {},
  stdio: ['pipe', 'pipe', 'pipe'],
});
port.postMessage({ type: 'pid', pid: child.pid });
child.stdin.write(frame(F_INIT, 0, 0, 0, 0, Buffer.from(JSON.stringify(data.init))));
// The process and its plugin worker boot meanwhile (a spare waits here): which module it loads comes later.
port.once('message', (message: { moduleUrl: string }) => {
  child.stdin.write(frame(F_LOAD, 0, 0, 0, 0, Buffer.from(String(message.moduleUrl))));
});
child.stdin.on('error', () => {});
child.stderr.setEncoding('utf8');
child.stderr.on('data', (text: string) => {
  stderrTail = (stderrTail + text).slice(-STDERR_TAIL);
});
child.stdout.on('data', (chunk: Buffer) => {
  if (over) return;
  let frames: Frame[];
  try {
    frames = reader.push(chunk);
  } catch (error) {
    end(`broke the cage's protocol (${(error as Error).message})`);
    return;
  }
  for (const f of frames) if (!over) onFrame(f);
});
child.on('error', (error) => end(`could not start its process: ${error.message}`));
child.on('exit', (code, signal) => {
  // Its last frames (the worker's exit, say) may still be in the pipe.
  const timer = setTimeout(() => exited(code, signal), DRAIN_MS);
  child.stdout.once('end', () => {
    clearTimeout(timer);
    exited(code, signal);
  });
});

function exited(code: number | null, signal: NodeJS.Signals | null): void {
  if (over) return;
  over = true;
  port.postMessage({ type: 'process-exit', code, signal, worker: workerExit, stderr: stderrTail });
}

/** The plugin process misbehaved: it is ended, and the router told why. */
function end(detail: string): void {
  if (over) return;
  over = true;
  child.kill('SIGKILL');
  port.postMessage({ type: 'process-exit', code: null, signal: null, detail, stderr: stderrTail });
}

function onFrame(f: Frame): void {
  switch (f.kind) {
    case F_MESSAGE: {
      let message: unknown;
      try {
        message = deserialize(f.body);
      } catch {
        return end('sent a message that does not decode');
      }
      if (message !== null && typeof message === 'object' && (message as { type?: unknown }).type === 'memory') {
        Atomics.store(ctrl, HEAP_MB, Number((message as { heapMb?: unknown }).heapMb) | 0);
      }
      port.postMessage(message);
      return;
    }
    case F_MEMORY:
      Atomics.store(ctrl, HEAP_MB, f.b);
      Atomics.store(ctrl, EXTERNAL_MB, f.c);
      return;
    case F_ANSWER: {
      if (f.body.length > ANSWER_REGION) return end(`answered ${f.body.length} bytes (at most ${ANSWER_REGION})`);
      // An answer to a call the router no longer waits for is still the end of it: the worker is free again.
      if (f.a !== forwarded) return;
      bytes.set(f.body, ANSWER_AT);
      Atomics.store(ctrl, HEAP_MB, f.b);
      Atomics.store(ctrl, EXTERNAL_MB, f.c);
      Atomics.store(ctrl, ANSWER_BYTES, f.body.length);
      Atomics.store(ctrl, ANSWER_SEQ, f.a);
      Atomics.store(ctrl, STATE, ANSWERED);
      Atomics.notify(ctrl, STATE);
      return;
    }
    case F_ASK:
      return ask(f);
    case F_WORKER_EXIT: {
      let said: { message?: unknown; code?: unknown } = {};
      try {
        said = JSON.parse(f.body.toString('utf8')) as typeof said;
      } catch {}
      workerExit = {
        code: f.a,
        message: typeof said.message === 'string' ? said.message.slice(0, 500) : undefined,
        errorCode: typeof said.code === 'string' ? said.code.slice(0, 64) : undefined,
      };
      return;
    }
    default:
      return end(`sent a frame of unknown kind ${f.kind}`);
  }
}

/** The plugin asks mid-call: handed to the router's thread as a worker asks it (worker.ts, ask()), or refused at once when it stopped waiting. */
function ask(f: Frame): void {
  if (f.body.length > SIDE_REGION) return end(`asked with ${f.body.length} bytes (at most ${SIDE_REGION})`);
  const kind = f.b;
  if (Atomics.load(ctrl, ROUTER_WAITING) === 0 || Atomics.load(ctrl, STATE) !== CALLING || askTag !== 0) {
    child.stdin.write(frame(F_ASK_REPLY, f.a, kind === ASK_TOKENS ? -1 : 0));
    return;
  }
  bytes.set(f.body, SIDE_AT);
  askTag = f.a;
  Atomics.store(ctrl, SIDE_KIND, kind);
  Atomics.store(ctrl, SIDE_OP, f.c);
  Atomics.store(ctrl, SIDE_COUNT, f.d);
  Atomics.store(ctrl, STATE, NEEDS_DATA);
  Atomics.notify(ctrl, STATE);
  // As in worker.ts: the router may have stopped waiting just now; an ask it missed is taken back.
  if (Atomics.load(ctrl, ROUTER_WAITING) === 0 && Atomics.compareExchange(ctrl, STATE, NEEDS_DATA, CALLING) === NEEDS_DATA) {
    askTag = 0;
    child.stdin.write(frame(F_ASK_REPLY, f.a, kind === ASK_TOKENS ? -1 : 0));
  }
}

/** Follows the router's control word: a new call goes to the plugin process, the router's answer to an ask goes back. */
async function followRouter(): Promise<void> {
  for (;;) {
    const state = Atomics.load(ctrl, STATE);
    if (state === CALLING && Atomics.load(ctrl, CALL_SEQ) !== forwarded) {
      forwarded = Atomics.load(ctrl, CALL_SEQ);
      const length = Math.min(Atomics.load(ctrl, CALL_BYTES), CALL_REGION);
      child.stdin.write(frame(F_CALL, forwarded, 0, 0, 0, bytes.subarray(CALL_AT, CALL_AT + length)));
    } else if (state === DATA_GIVEN && askTag !== 0) {
      const count = Atomics.load(ctrl, SIDE_COUNT);
      const length = Math.max(0, Math.min(Atomics.load(ctrl, SIDE_BYTES), SIDE_REGION));
      child.stdin.write(frame(F_ASK_REPLY, askTag, count, 0, 0, bytes.subarray(SIDE_AT, SIDE_AT + length)));
      askTag = 0;
      // Read: back to the call, as a worker's resume() does.
      Atomics.compareExchange(ctrl, STATE, DATA_GIVEN, CALLING);
      continue;
    }
    await changed(ctrl, STATE, state);
  }
}

void followRouter();
