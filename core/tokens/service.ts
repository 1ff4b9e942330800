// The router's side of the tokenizer worker (docs/tokens.md): one worker per
// process, loading each tokenizer folder once, and counting prompts within a
// per-request budget. Whatever goes wrong (a folder still loading, a prompt
// too long to wait for, a tokenizer or template that throws or runs long, a
// worker that died) the answer is a reason to use the estimate, never an
// exception, and the request is routed.
import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker, type WorkerOptions } from 'node:worker_threads';
import { learnedBlockSizes, rememberBlockKeys } from '../fleet/kv-keys.ts';
import type { CountJob } from './counter.ts';
import { WarmHint } from './warm-hint.ts';
import type { FromWorker, ToWorker, WorkerProgress } from './worker.ts';

export type FallbackReason = 'loading' | 'load_failed' | 'too_long' | 'timeout' | 'busy' | 'warming' | 'failed' | 'restarted';
export type CountOutcome =
  | { readonly ok: true; readonly ids: readonly Uint32Array[] }
  | { readonly ok: false; readonly reason: FallbackReason; readonly detail?: string };

export interface TokenizerServiceOptions {
  /** Bytes of cached segment ids per folder (default 64 MiB). */
  readonly cacheBytes?: number;
  /** A job running this long means a hostile prompt or a broken tokenizer: the worker is replaced (default 5 s). */
  readonly stuckMs?: number;
  /** How many characters the worker encodes per millisecond, at the least (sets how long a prompt is worth waiting for). */
  readonly charsPerMs?: number;
  /** Jobs waiting at most; more are answered with the estimate at once (default 256). */
  readonly maxPending?: number;
  /** Block sizes to name prompts' blocks for even before the KV index learned any (default none). */
  readonly blockSizes?: readonly number[];
}

/** Prompts this long (not yet cached) are still encoded after the request went on, to make its next turn exact. */
export const MAX_WARM_CHARS = 1_000_000;

interface Pending {
  resolve(outcome: CountOutcome): void;
  /** How long the request waits once its job is posted (undefined: no limit, or answered already). */
  budgetMs?: number;
  timer?: NodeJS.Timeout;
}

type FolderState = { state: 'loading'; done: Promise<string | undefined> } | { state: 'ready' } | { state: 'failed'; error: string };

/** Next to this module: worker.js in dist/; under tsx (tests, benches) worker.ts, through tsx's loader (a worker does not inherit it). */
function newWorker(options: WorkerOptions): Worker {
  if (!import.meta.url.endsWith('.ts')) return new Worker(new URL('./worker.js', import.meta.url), options);
  const api = import.meta.resolve('tsx/esm/api');
  const script = new URL('./worker.ts', import.meta.url).href;
  return new Worker(`import(${JSON.stringify(api)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(script)}); });`, { ...options, eval: true });
}

/** A worker that dies this many times in a row without loading anything is given up on: the estimate serves. */
const MAX_FAILED_STARTS = 3;

export class TokenizerService {
  static #shared?: TokenizerService;
  /** The process's one service: every snapshot and reload shares its loaded folders. */
  static shared(): TokenizerService {
    return (TokenizerService.#shared ??= new TokenizerService());
  }

  readonly fallbacks = new Map<FallbackReason, number>();
  restarts = 0;
  readonly #options: Required<TokenizerServiceOptions>;
  #worker?: Worker;
  /** The worker's answers come on a port of their own, so a request's timer can take those already there (#timedOut). */
  #answers?: MessagePort;
  /** The worker's running job and its start (core/tokens/worker.ts, WorkerProgress). */
  #progress = new BigInt64Array(new SharedArrayBuffer(16));
  readonly #folders = new Map<string, FolderState>();
  readonly #loading = new Map<string, (error: string | undefined) => void>();
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #watchdog?: NodeJS.Timeout;
  #failedStarts = 0;
  /** The worker is encoding a long prompt for its next turn: nothing posted now is answered within a request's wait. */
  #warming = false;
  readonly #hint = new WarmHint();
  /** Messages for the worker not yet posted: the jobs of one turn of the event loop go as one message (core/tokens/worker.ts). */
  #outbox: ToWorker[] = [];
  #flushScheduled = false;

  constructor(options: TokenizerServiceOptions = {}) {
    this.#options = { cacheBytes: 64 * 1024 * 1024, stuckMs: 5000, charsPerMs: 500, maxPending: 256, blockSizes: [], ...options };
  }

  /** Starts loading a folder (once); resolves with what went wrong, or undefined when it is ready. */
  load(dir: string): Promise<string | undefined> {
    const state = this.#folders.get(dir);
    if (state?.state === 'ready') return Promise.resolve(undefined);
    if (state?.state === 'failed') return Promise.resolve(state.error);
    if (state?.state === 'loading') return state.done;
    const done = new Promise<string | undefined>((resolve) => this.#loading.set(dir, resolve));
    this.#folders.set(dir, { state: 'loading', done });
    this.#post({ type: 'load', dir });
    return done;
  }

  /** 'ready', 'loading', 'failed' or 'absent' (never asked for). */
  state(dir: string): FolderState['state'] | 'absent' {
    return this.#folders.get(dir)?.state ?? 'absent';
  }

  /**
   * The prompt's token ids, or why not. Waits at most `budgetMs` (Infinity
   * for one-shot tools such as `explain`); a prompt whose uncached part
   * would take longer is answered at once with 'too_long' and encoded anyway.
   */
  count(dir: string, job: CountJob, budgetMs: number): Promise<CountOutcome> {
    const state = this.#folders.get(dir);
    if (state?.state !== 'ready') {
      if (state?.state === 'failed') return Promise.resolve(this.#fallback('load_failed', state.error));
      void this.load(dir);
      if (budgetMs !== Infinity) return Promise.resolve(this.#fallback('loading'));
      return this.load(dir).then((error) => (error ? this.#fallback('load_failed', error) : this.count(dir, job, budgetMs)));
    }
    if (this.#pending.size >= this.#options.maxPending) return Promise.resolve(this.#fallback('busy'));
    const id = this.#nextId++;
    return new Promise<CountOutcome>((resolve) => {
      const pending: Pending = { resolve };
      const waitChars = budgetMs === Infinity ? Infinity : Math.max(256, budgetMs * this.#options.charsPerMs);
      const worthWaiting = this.#hint.worthWaiting(job, waitChars);
      if (budgetMs !== Infinity && (this.#warming || !worthWaiting)) {
        // Waiting would only reach the timeout, or a "too long": the estimate now, and the job still goes, to warm the cache.
        pending.resolve = () => {};
        resolve(this.#fallback(this.#warming ? 'warming' : 'too_long'));
        // A cold long chat posted now will be encoded for its next turn: what is posted after it waits that long.
        if (!worthWaiting) this.#warming = true;
      } else if (budgetMs !== Infinity) pending.budgetMs = budgetMs; // its timer starts as the job is posted (#flush)
      this.#pending.set(id, pending);
      this.#post({ type: 'count', id, dir, job, waitChars, warmChars: MAX_WARM_CHARS, blockSizes: this.#blockSizes() });
    });
  }

  /** The block sizes engines publish (learned by the KV index), plus the ones given: the worker names prompts' blocks for them. */
  #blockSizes(): number[] {
    const sizes = learnedBlockSizes();
    for (const size of this.#options.blockSizes) if (!sizes.includes(size)) sizes.push(size);
    return sizes;
  }

  /** Stops the worker; loaded folders are forgotten. */
  async close(): Promise<void> {
    clearInterval(this.#watchdog);
    this.#watchdog = undefined;
    const worker = this.#worker;
    this.#worker = undefined;
    this.#closeAnswers();
    this.#outbox = [];
    this.#failAll('restarted');
    this.#folders.clear();
    if (worker) await worker.terminate();
  }

  #fallback(reason: FallbackReason, detail?: string): CountOutcome {
    this.fallbacks.set(reason, (this.fallbacks.get(reason) ?? 0) + 1);
    return { ok: false, reason, detail };
  }

  #post(message: ToWorker): void {
    this.#ensureWorker().ref(); // something waits for it: the process must not exit under it
    this.#answers?.ref();
    this.#outbox.push(message);
    if (!this.#flushScheduled) {
      this.#flushScheduled = true;
      setImmediate(this.#flush);
    }
  }

  /** After the event loop's I/O callbacks: every request that arrived in them is in one message. */
  readonly #flush = (): void => {
    this.#flushScheduled = false;
    const batch = this.#outbox;
    this.#outbox = [];
    if (batch.length === 0 || !this.#worker) return;
    this.#worker.postMessage(batch);
    // The wait is the worker's time: what the router's own thread did before this turn's jobs went is not counted in it.
    for (const message of batch) {
      if (message.type !== 'count') continue;
      const pending = this.#pending.get(message.id);
      if (pending?.budgetMs !== undefined) pending.timer = setTimeout(this.#timedOut, pending.budgetMs, message.id);
    }
  };

  /**
   * A request's wait ran out. Answers the worker posted meanwhile may still wait in the port's queue (the event loop
   * runs timers before it reads messages, and a busy or descheduled router thread finds both due at once): those are
   * taken first, so that only a job the worker has not answered goes on with the estimate.
   */
  readonly #timedOut = (id: number): void => {
    const answers = this.#answers;
    for (let received = answers && receiveMessageOnPort(answers); received; received = answers && receiveMessageOnPort(answers))
      this.#onBatch(received.message as readonly FromWorker[]);
    const pending = this.#pending.get(id);
    if (pending === undefined) return;
    // The answer may still come: it warms the cache, and is dropped here. The job stays pending, for the stuck-job watchdog.
    const resolve = pending.resolve;
    pending.resolve = () => {};
    resolve(this.#fallback('timeout'));
  };

  readonly #onBatch = (batch: readonly FromWorker[]): void => {
    for (const message of batch) this.#onMessage(message);
  };

  /** Idle, the worker must not keep the process alive. */
  #unrefWhenIdle(): void {
    if (this.#pending.size !== 0 || this.#loading.size !== 0) return;
    this.#worker?.unref();
    this.#answers?.unref();
  }

  #ensureWorker(): Worker {
    if (this.#worker) return this.#worker;
    // The router's environment holds its secrets (the admin token): none of it goes in.
    const progress = new SharedArrayBuffer(16);
    const { port1: answers, port2: answerPort } = new MessageChannel();
    const workerData: WorkerProgress = { cacheBytes: this.#options.cacheBytes, progress, answers: answerPort };
    const worker = newWorker({ workerData, transferList: [answerPort], name: 'switchyard tokenizer', env: {} });
    this.#progress = new BigInt64Array(progress);
    worker.unref();
    answers.on('message', this.#onBatch);
    answers.unref();
    this.#answers = answers;
    worker.on('error', (error) => this.#restart(worker, error.message));
    worker.on('exit', (code) => this.#restart(worker, `exited with code ${code}`));
    this.#worker = worker;
    this.#watchdog ??= setInterval(() => this.#checkStuck(), Math.max(50, Math.floor(this.#options.stuckMs / 5)));
    this.#watchdog.unref();
    return worker;
  }

  #onMessage(message: FromWorker): void {
    this.#warming = message.type === 'counted' && message.warming === true;
    if (message.type === 'warmed') return;
    if (message.type === 'loaded') {
      this.#failedStarts = 0;
      const resolve = this.#loading.get(message.dir);
      this.#loading.delete(message.dir);
      this.#folders.set(message.dir, message.error ? { state: 'failed', error: message.error } : { state: 'ready' });
      resolve?.(message.error);
      this.#unrefWhenIdle();
      return;
    }
    const pending = this.#pending.get(message.id);
    if (!pending) return;
    this.#pending.delete(message.id);
    clearTimeout(pending.timer);
    this.#unrefWhenIdle();
    if (message.ids) {
      for (const { blockSize, keys } of message.blockKeys ?? []) rememberBlockKeys(message.ids[0], blockSize, keys);
      pending.resolve({ ok: true, ids: message.ids });
    } else pending.resolve(this.#fallback(message.deferred ? 'too_long' : 'failed', message.error));
  }

  /** A job that runs far too long: a hostile prompt or a broken tokenizer. The worker goes; a new one reloads the folders. */
  #checkStuck(): void {
    const running = Number(Atomics.load(this.#progress, 0));
    // A job that is no longer pending (answered 'too_long', then encoded to warm the cache) is not watched.
    if (running === 0 || !this.#pending.has(running) || !this.#worker) return;
    const startedAt = Number(Atomics.load(this.#progress, 1));
    if (performance.timeOrigin + performance.now() - startedAt > this.#options.stuckMs) {
      const worker = this.#worker;
      void worker.terminate();
      this.#restart(worker, `a prompt took over ${this.#options.stuckMs} ms`);
    }
  }

  #restart(worker: Worker, why: string): void {
    if (this.#worker !== worker) return;
    this.#worker = undefined;
    this.#closeAnswers();
    this.#outbox = []; // its jobs are failed below, its loads posted again
    this.#warming = false;
    this.restarts++;
    this.#failAll('restarted');
    if (++this.#failedStarts >= MAX_FAILED_STARTS) {
      // It cannot even start: every folder is given up on (each request estimates, counted as load_failed).
      const error = `the tokenizer worker failed ${this.#failedStarts} times in a row (last: ${why})`;
      for (const dir of this.#folders.keys()) this.#folders.set(dir, { state: 'failed', error });
      for (const [dir, resolve] of this.#loading) {
        this.#loading.delete(dir);
        resolve(error);
      }
      return;
    }
    // Folders that were ready load again in a fresh worker; requests estimate meanwhile.
    const dirs = [...this.#folders].filter(([, s]) => s.state !== 'failed').map(([dir]) => dir);
    for (const dir of dirs) this.#folders.delete(dir);
    for (const [dir, resolve] of this.#loading) {
      this.#loading.delete(dir);
      void this.load(dir).then(resolve);
    }
    for (const dir of dirs) void this.load(dir);
  }

  /** The gone worker's port: nothing more is read from it. */
  #closeAnswers(): void {
    this.#answers?.close();
    this.#answers = undefined;
  }

  #failAll(reason: FallbackReason): void {
    for (const [id, pending] of this.#pending) {
      this.#pending.delete(id);
      clearTimeout(pending.timer);
      pending.resolve(this.#fallback(reason));
    }
  }
}
