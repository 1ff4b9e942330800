// The tokenizer worker: loads tokenizer folders (one instance per folder,
// for every model, pool and reload that names it) and counts prompts off the
// router's event loop. Messages: core/tokens/service.ts. Both ways they go in
// batches, an array per message: the jobs the router's thread posted in one
// turn of its event loop, and the answers of the jobs the worker ran since it
// last posted (docs/tokens.md, "Speed": a message costs far more than its
// content).
import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
import { blockKeysOf } from '../fleet/kv-keys.ts';
import { FolderCounter, type CountJob, type CountPlan } from './counter.ts';
import { loadTokenizerFolder } from './folder.ts';

export type ToWorker =
  | { readonly type: 'load'; readonly dir: string }
  | {
      readonly type: 'count';
      readonly id: number;
      readonly dir: string;
      readonly job: CountJob;
      readonly waitChars: number;
      readonly warmChars: number;
      /** Block sizes to name the prompt's blocks for (the KV index's): the router's thread then only looks them up. */
      readonly blockSizes?: readonly number[];
    };

/** A one-prompt job's block names for one block size (core/fleet/kv-keys.ts). */
export interface BlockKeys {
  readonly blockSize: number;
  readonly keys: Float64Array;
}

export type FromWorker =
  | { readonly type: 'loaded'; readonly dir: string; readonly error?: string }
  | {
      readonly type: 'counted';
      readonly id: number;
      readonly ids?: Uint32Array[];
      readonly blockKeys?: BlockKeys[];
      readonly error?: string;
      readonly deferred?: boolean;
      /** After this answer the worker encodes the deferred prompt: jobs behind it wait that long. */
      readonly warming?: boolean;
    }
  | { readonly type: 'warmed' };

/**
 * The worker's data. `progress` is what it shares with the router's thread without a message: the running job's id
 * (0 when none) and when it started (ms, timeOrigin-based), for the stuck-job watchdog. A message per job would wake
 * the router's thread once more.
 */
export interface WorkerProgress {
  readonly cacheBytes: number;
  /** BigInt64Array over it: [job id, started at]. */
  readonly progress: SharedArrayBuffer;
  /** Where the answers go (FromWorker batches): a port of their own, which the router's thread can also read synchronously. */
  readonly answers: MessagePort;
}

const { cacheBytes, progress: progressBuffer, answers: answerPort } = workerData as WorkerProgress;
const progress = new BigInt64Array(progressBuffer);
const counters = new Map<string, FolderCounter>();
const port = parentPort!;
/** Block names of remembered conversation starts (a link's ids): a next turn hashes only its new blocks. */
const headKeys = new WeakMap<Uint32Array, Map<number, Float64Array>>();

function blockKeys(plan: CountPlan, ids: Uint32Array, sizes: readonly number[]): BlockKeys[] {
  const prompt = plan.prompts[0];
  const before = prompt.remember?.link.state?.ids;
  return sizes.map((blockSize) => {
    const keys = blockKeysOf(ids, blockSize, prompt.head && headKeys.get(prompt.head)?.get(blockSize));
    if (before !== undefined) {
      let bySize = headKeys.get(before);
      if (bySize === undefined) headKeys.set(before, (bySize = new Map()));
      bySize.set(blockSize, keys.slice(0, Math.floor(before.length / blockSize)));
    }
    return { blockSize, keys };
  });
}

/** Answers not yet posted, with what they transfer; posted as one message once the jobs received are done, or after FLUSH_AFTER_MS. */
let answers: FromWorker[] = [];
let transfers: ArrayBuffer[] = [];
let oldestAnswer = 0;
let flushScheduled = false;
/** A batch's first answer waits at most about this long for the jobs after it (a next turn's job takes ~0.05 ms). */
const FLUSH_AFTER_MS = 1;
/** A job with more text than this to encode (~1 ms of it, docs/tokens.md) posts the answers before it first. */
const FLUSH_BEFORE_COLD_CHARS = 500;

function answer(message: FromWorker, transfer: ArrayBuffer[] = []): void {
  if (answers.length === 0) oldestAnswer = performance.now();
  answers.push(message);
  for (const buffer of transfer) transfers.push(buffer);
  if (!flushScheduled) {
    flushScheduled = true;
    setImmediate(flush);
  }
}

function flush(): void {
  flushScheduled = false;
  if (answers.length === 0) return;
  const batch = answers;
  const transfer = transfers;
  answers = [];
  transfers = [];
  answerPort.postMessage(batch, transfer);
}

port.on('message', (batch: readonly ToWorker[]) => {
  for (const message of batch) {
    run(message);
    if (answers.length > 0 && performance.now() - oldestAnswer > FLUSH_AFTER_MS) flush();
  }
});

function run(message: ToWorker): void {
  if (message.type === 'load') {
    if (counters.has(message.dir)) return answer({ type: 'loaded', dir: message.dir });
    flush(); // loading takes seconds
    try {
      counters.set(message.dir, new FolderCounter(loadTokenizerFolder(message.dir), cacheBytes));
      answer({ type: 'loaded', dir: message.dir });
    } catch (error) {
      answer({ type: 'loaded', dir: message.dir, error: (error as Error).message });
    }
    return;
  }
  const { id, dir, job, waitChars, warmChars, blockSizes = [] } = message;
  const counter = counters.get(dir);
  if (!counter) return answer({ type: 'counted', id, error: `the tokenizer in ${dir} is not loaded` });
  // The started-at first, then the id: a watchdog that reads this id reads this job's start, or a later one.
  Atomics.store(progress, 1, BigInt(Math.floor(performance.timeOrigin + performance.now())));
  Atomics.store(progress, 0, BigInt(id));
  try {
    const plan = counter.plan(job, waitChars);
    if (plan.coldChars > waitChars) {
      // Too long to wait for: the request goes on with the estimate, and the ids
      // are still worked out so that the conversation's next turn is exact.
      const warming = plan.coldChars <= warmChars;
      answer({ type: 'counted', id, deferred: true, warming });
      if (warming) {
        flush(); // the router's thread learns now that the worker is busy for a while
        counter.encode(job, plan);
        answer({ type: 'warmed' });
      }
      return;
    }
    if (plan.coldChars > FLUSH_BEFORE_COLD_CHARS) flush();
    const ids = counter.encode(job, plan);
    const keys = ids.length === 1 && blockSizes.length > 0 ? blockKeys(plan, ids[0], blockSizes) : undefined;
    answer({ type: 'counted', id, ids, blockKeys: keys }, [
      ...ids.map((a) => a.buffer as ArrayBuffer),
      ...(keys ?? []).map((k) => k.keys.buffer as ArrayBuffer),
    ]);
  } catch (error) {
    answer({ type: 'counted', id, error: (error as Error).message });
  } finally {
    Atomics.store(progress, 0, 0n);
  }
}
