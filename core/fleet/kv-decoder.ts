// Decodes KV event payloads on a worker thread, so that no message, however
// large, blocks the router's event loop while it is unpacked: the loop only
// copies the bytes over and receives compact typed arrays back. One worker
// serves every subscription; what waits for it is bounded in bytes (past the
// bound a message is dropped and counted, as ZeroMQ would past its
// high-water mark), its heap is capped, and a worker that dies is replaced.
// Where no worker can be started the payload is decoded in line (logged once).
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { Logger } from '../../sdk/index.ts';
import { bundledScript } from '../bundled-script.ts';
import { decodeKvPayload, type KvEventBatch } from './kv-events.ts';

/** Bytes of payloads waiting for the worker: beyond this, messages are dropped (counted as overloaded). */
const MAX_BACKLOG_BYTES = 64 * 1024 * 1024;
/** The worker's heap: the largest message decodes to well under this. */
const WORKER_HEAP_MB = 512;

export type DecodeResult = KvEventBatch | { readonly error: string } | { readonly overloaded: true };

// The sibling source in a checkout, the compiled sibling in dist/.
const WORKER_ENTRY = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? './kv-decode-worker.ts' : './kv-decode-worker.js', import.meta.url));

/** The worker's code, bundled once per process into a file named by its hash (core/bundled-script.ts, as the plugin cage does). */
function workerScriptPath(): Promise<string> {
  return bundledScript(WORKER_ENTRY, 'switchyard-kv');
}

interface Pending {
  readonly resolve: (result: DecodeResult) => void;
  readonly bytes: number;
}

export class KvDecoder {
  #worker: Promise<Worker | undefined> | undefined;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #backlog = 0;
  #closed = false;
  #inlineWarned = false;

  constructor(private readonly log: Logger) {}

  /** Decodes one payload; `overloaded` when too much is already waiting. */
  async decode(seq: bigint, payload: Uint8Array): Promise<DecodeResult> {
    if (this.#backlog + payload.length > MAX_BACKLOG_BYTES) return { overloaded: true };
    const worker = await this.worker();
    if (!worker) {
      const batch = decodeKvPayload(seq, payload);
      return typeof batch === 'string' ? { error: batch } : batch;
    }
    const id = this.#nextId++;
    this.#backlog += payload.length;
    return new Promise((resolve) => {
      this.#pending.set(id, { resolve, bytes: payload.length });
      // Moved, not copied, when the bytes are a buffer of their own (ZeroMQ's large messages are):
      // copying 16 MiB would cost the loop tens of ms on a busy machine.
      const whole = payload.byteOffset === 0 && payload.byteLength === payload.buffer.byteLength && payload.buffer instanceof ArrayBuffer;
      try {
        worker.postMessage({ id, seq, payload }, whole ? [payload.buffer as ArrayBuffer] : []);
      } catch {
        worker.postMessage({ id, seq, payload });
      }
    });
  }

  /** Starts the worker ahead of the first message (its start costs the loop a few ms once). */
  async warm(): Promise<void> {
    await this.worker();
  }

  private worker(): Promise<Worker | undefined> {
    this.#worker ??= this.start();
    return this.#worker;
  }

  private async start(): Promise<Worker | undefined> {
    try {
      const script = await workerScriptPath();
      if (this.#closed) return undefined;
      const worker = new Worker(pathToFileURL(script), {
        env: {},
        argv: [],
        execArgv: [],
        resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB, maxYoungGenerationSizeMb: 64 },
        name: 'switchyard kv event decoder',
      });
      worker.unref();
      worker.on('message', (message: { id: number; batch?: KvEventBatch; error?: string }) => {
        const pending = this.#pending.get(message.id);
        if (!pending) return;
        this.#pending.delete(message.id);
        this.#backlog -= pending.bytes;
        pending.resolve(message.batch ?? { error: message.error ?? 'the decoder answered nothing' });
      });
      const failed = (why: string) => {
        if (this.#worker === undefined) return;
        this.#worker = undefined; // the next message starts a new one
        for (const pending of this.#pending.values()) pending.resolve({ error: why });
        this.#pending.clear();
        this.#backlog = 0;
        if (!this.#closed) this.log.warn('kv events: the decoder thread stopped; starting another', { reason: why });
      };
      worker.once('error', (error) => failed(`the decoder thread failed: ${error.message}`));
      worker.once('exit', (code) => failed(`the decoder thread exited (code ${code})`));
      return worker;
    } catch (error) {
      if (!this.#inlineWarned) {
        this.#inlineWarned = true;
        this.log.warn('kv events: no decoder thread; decoding on the event loop', { error: (error as Error).message });
      }
      return undefined;
    }
  }

  close(): void {
    this.#closed = true;
    const worker = this.#worker;
    this.#worker = undefined;
    for (const pending of this.#pending.values()) pending.resolve({ error: 'the feed closed' });
    this.#pending.clear();
    void worker?.then((w) => w?.terminate());
  }
}
