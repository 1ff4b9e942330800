// A plugin's own process (isolation: process). Started by the relay
// (relay.ts) with an empty environment, it runs the plugin worker
// (worker.ts, unchanged) in a worker thread with the cage's heap cap, and
// plays the router's part of the shared-memory protocol for it: calls and
// the answers to its mid-call asks come in on stdin, its answers, asks and
// messages go out on stdout (frames.ts). This thread runs no plugin code, so
// it always sees the relay's pipe close: a router that dies, however, takes
// this process with it. When the plugin's heap reaches V8's cap and V8
// aborts, it aborts this process, not the router.
import { pathToFileURL } from 'node:url';
import { serialize } from 'node:v8';
import { Worker } from 'node:worker_threads';
import { changed, F_ANSWER, F_ASK, F_ASK_REPLY, F_CALL, F_INIT, F_LOAD, F_MEMORY, F_MESSAGE, F_WORKER_EXIT, type Frame, FrameReader, frame } from './frames.ts';
import {
  ANSWER_AT,
  ANSWER_BYTES,
  ANSWER_SEQ,
  ANSWERED,
  ASK_KV_HASHES,
  ASK_KV_TOKENS,
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
  SHARED_BYTES,
  SIDE_AT,
  SIDE_COUNT,
  SIDE_KIND,
  SIDE_OP,
  SIDE_REGION,
  STATE,
} from './wire.ts';

/** What the relay sends first (F_INIT): the plugin worker starts with it, and imports the module once F_LOAD names it. */
export interface ProcessInit {
  readonly workerScript: string;
  readonly spinMicros: number;
  readonly heapMb: number;
  readonly heapHeadroomMb: number;
  /**
   * The worker's messages per second past which it floods. Counted here, one hop from the worker: after the
   * pipe and the relay, a burst may reach the router spread over more than a second on a busy machine.
   */
  readonly maxMessagesPerSecond: number;
}

/** A message of the worker's larger than this is not passed on (the router would cut it anyway). */
const MAX_MESSAGE_BYTES = 64 * 1024;
/** How often the worker's memory words are looked at between calls, ms (the worker updates them every 50 ms). */
const MEMORY_POLL_MS = 50;

const shared = new SharedArrayBuffer(SHARED_BYTES);
const ctrl = new Int32Array(shared, 0, 16);
const bytes = new Uint8Array(shared);
const reader = new FrameReader();
let worker: Worker | undefined;
let lastError: { message: string; code?: string } | undefined;
/** The sequence of the call in flight, 0 when none. */
let calling = 0;
/** Tag of the ask forwarded to the relay and not yet answered, 0 when none. */
let askTag = 0;
let nextTag = 0;
let watching = false;
let sentMemory = { heap: -1, external: -1 };

/** The worker's messages of this event-loop turn, written together: one write for a burst, not one each. */
let pending: Buffer[] = [];
/** A burst past this many in one turn is cut: the router quarantines a plugin for far fewer a second. */
const MAX_MESSAGES_PER_TURN = 10_000;

const send = (chunk: Buffer): void => {
  flushMessages();
  process.stdout.write(chunk);
};

let floodWindow = { start: 0, messages: 0, reported: false };

function queueMessage(chunk: Buffer, limit: number): void {
  const t = Date.now();
  if (t - floodWindow.start >= 1000) floodWindow = { start: t, messages: 0, reported: floodWindow.reported };
  if (++floodWindow.messages > limit) {
    // Said once, at once and ahead of what is queued (a flooding plugin's lines are not worth passing on): the router
    // quarantines the plugin and ends this process.
    if (!floodWindow.reported) {
      floodWindow.reported = true;
      pending = [];
      process.stdout.write(frame(F_MESSAGE, 0, 0, 0, 0, serialize({ type: 'flooding' })));
    }
    return;
  }
  if (pending.length >= MAX_MESSAGES_PER_TURN) return;
  if (pending.length === 0) setImmediate(flushMessages);
  pending.push(chunk);
}

function flushMessages(): void {
  if (pending.length === 0) return;
  const chunks = pending;
  pending = [];
  process.stdout.write(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
}

// The relay gone (the router stopped or died): nothing is left to serve. SIGKILL, not exit(): a plugin
// inside one long runtime call would hold a clean exit up.
process.stdin.on('end', () => process.kill(process.pid, 'SIGKILL'));
process.stdin.on('error', () => process.kill(process.pid, 'SIGKILL'));
process.stdout.on('error', () => process.kill(process.pid, 'SIGKILL'));
process.stdin.on('data', (chunk: Buffer) => {
  let frames: Frame[];
  try {
    frames = reader.push(chunk);
  } catch {
    process.kill(process.pid, 'SIGKILL');
    return;
  }
  for (const f of frames) onFrame(f);
});

function onFrame(f: Frame): void {
  switch (f.kind) {
    case F_INIT:
      if (!worker) start(JSON.parse(f.body.toString('utf8')) as ProcessInit);
      return;
    case F_LOAD:
      worker?.postMessage({ moduleUrl: f.body.toString('utf8') });
      return;
    case F_CALL: {
      if (f.body.length > CALL_REGION) return;
      bytes.set(f.body, CALL_AT);
      calling = f.a;
      Atomics.store(ctrl, CALL_BYTES, f.body.length);
      Atomics.store(ctrl, CALL_SEQ, f.a);
      Atomics.store(ctrl, ROUTER_WAITING, 1);
      Atomics.store(ctrl, STATE, CALLING);
      Atomics.notify(ctrl, STATE);
      void watch();
      return;
    }
    case F_ASK_REPLY: {
      // A reply to an ask the worker gave up on (it waits 1 s) is dropped: its successor must not read it.
      if (f.a !== askTag || Atomics.load(ctrl, STATE) !== NEEDS_DATA || f.body.length > SIDE_REGION) return;
      askTag = 0;
      bytes.set(f.body, SIDE_AT);
      Atomics.store(ctrl, SIDE_COUNT, f.b);
      Atomics.store(ctrl, STATE, DATA_GIVEN);
      Atomics.notify(ctrl, STATE);
      void watch();
      return;
    }
  }
}

function start(init: ProcessInit): void {
  worker = new Worker(pathToFileURL(init.workerScript), {
    workerData: { shared, spinMicros: init.spinMicros, heapMb: init.heapMb },
    env: {},
    argv: [],
    execArgv: [],
    // Its own streams, never this process's stdout (the relay's frames).
    stdout: true,
    stderr: true,
    resourceLimits: {
      maxOldGenerationSizeMb: init.heapMb + init.heapHeadroomMb,
      maxYoungGenerationSizeMb: Math.max(4, Math.ceil(init.heapMb / 8)),
      stackSizeMb: 4,
    },
  });
  worker.stdout.resume();
  worker.stderr.resume();
  worker.on('message', (message: unknown) => {
    let body: Buffer;
    try {
      body = serialize(message);
    } catch {
      return;
    }
    if (body.length <= MAX_MESSAGE_BYTES) queueMessage(frame(F_MESSAGE, 0, 0, 0, 0, body), init.maxMessagesPerSecond);
    else if (message !== null && typeof message === 'object' && 'type' in message)
      queueMessage(
        frame(F_MESSAGE, 0, 0, 0, 0, serialize({ type: (message as { type: unknown }).type, message: '(a message too large to pass on)' })),
        init.maxMessagesPerSecond,
      );
  });
  worker.on('error', (error: Error & { code?: string }) => (lastError = { message: String(error.message).slice(0, 500), code: error.code }));
  worker.on('exit', (code) => {
    send(frame(F_WORKER_EXIT, code, 0, 0, 0, Buffer.from(JSON.stringify(lastError ?? {}))));
    process.stdout.end(() => process.exit(0));
  });
  setInterval(reportMemory, MEMORY_POLL_MS).unref();
}

/** The worker's memory words, when they changed since last sent (between calls a leak grows them too). */
function reportMemory(): void {
  const heap = Atomics.load(ctrl, HEAP_MB);
  const external = Atomics.load(ctrl, EXTERNAL_MB);
  if (heap === sentMemory.heap && external === sentMemory.external) return;
  sentMemory = { heap, external };
  send(frame(F_MEMORY, 0, heap, external));
}

/** Follows the call in flight until it is answered: forwards the worker's asks and, at the end, its answer. */
async function watch(): Promise<void> {
  if (watching) return;
  watching = true;
  try {
    while (calling !== 0) {
      const state = Atomics.load(ctrl, STATE);
      if (state === ANSWERED && Atomics.load(ctrl, ANSWER_SEQ) === calling) {
        const length = Math.min(Atomics.load(ctrl, ANSWER_BYTES), SIDE_AT - ANSWER_AT);
        const heap = Atomics.load(ctrl, HEAP_MB);
        const external = Atomics.load(ctrl, EXTERNAL_MB);
        sentMemory = { heap, external };
        send(frame(F_ANSWER, calling, heap, external, 0, bytes.subarray(ANSWER_AT, ANSWER_AT + length)));
        calling = 0;
        return;
      }
      if (state === NEEDS_DATA && askTag === 0) {
        askTag = nextTag = (nextTag % 0x7fff_ffff) + 1;
        const kind = Atomics.load(ctrl, SIDE_KIND);
        const count = Atomics.load(ctrl, SIDE_COUNT);
        send(frame(F_ASK, askTag, kind, Atomics.load(ctrl, SIDE_OP), count, bytes.subarray(SIDE_AT, SIDE_AT + askedBytes(kind, count))));
        // Its reply (F_ASK_REPLY) wakes this loop again.
        return;
      }
      await changed(ctrl, STATE, state);
    }
  } finally {
    watching = false;
  }
}

/** What the worker wrote in the side region for an ask of `kind` (worker.ts, kvIndexView). */
function askedBytes(kind: number, count: number): number {
  const n = Math.max(0, count);
  if (kind === ASK_KV_HASHES) return Math.min(n * 8, SIDE_REGION);
  if (kind !== ASK_KV_TOKENS) return 0;
  // The token ids, then the adapter: a flag byte, and when set a length (i32) and UTF-16 code units.
  const at = n * 4;
  if (at >= SIDE_REGION) return SIDE_REGION;
  if (bytes[SIDE_AT + at] !== 1) return at + 1;
  const chars = new DataView(shared, SIDE_AT + at + 1, 4).getInt32(0, true);
  return Math.min(SIDE_REGION, at + 5 + Math.max(0, Math.min(chars, 256)) * 2);
}
