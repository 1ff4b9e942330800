// A third-party plugin in a cage: its module runs in a worker thread of its
// own, with an empty environment and a heap budget, and the router calls it
// synchronously from decide() through shared memory with a hard timeout.
// With isolation 'process' (the default) that worker lives in a process of
// the plugin's own (child.ts), and the router's side of the shared memory is
// played by a relay thread (relay.ts) that carries calls over a pipe: an
// allocation that reaches V8's heap cap in one call aborts that process, and
// the router sees a crash it handles like any other.
//
// A pick that does not answer in time is skipped (the chain goes on); the
// worker stays busy and later calls skip it at once. A call still running
// after `stuckAfterMs`, a worker that dies (exit, crash), one whose live heap
// or buffers outgrow its budget, or one that floods the router with messages
// is terminated and the plugin is
// quarantined: skipped until its file changes (a changed file is a new
// cage). Hooks (onRouted, onCompleted, dispose) are queued and travel with
// the next call, in order, so they cost no round trip of their own.
import { pathToFileURL } from 'node:url';
import { deserialize, serialize } from 'node:v8';
import { Worker } from 'node:worker_threads';
import type { CachedPrefix, Candidate, Logger, PickResult, RoutedRequest, StrategyContext, StrategyInstance } from '../../../sdk/types.ts';
import { redactSecrets } from '../../observe/secrets.ts';
import { readPickAnswer, StringTable, writeCachedPrefixes, writeCandidates, writeRequest } from './codec.ts';
import { scriptPath, WORKER_ENTRY } from './bundle.ts';
import { startRelay } from './plugin-process.ts';
import { CageSkip } from './skip.ts';
import {
  A_DONE,
  A_STATE,
  A_THREW,
  ANSWER_AT,
  ASK_HASHES,
  ASK_KV_HASHES,
  ASK_KV_TOKENS,
  ASK_TOKENS,
  ANSWER_BYTES,
  ANSWER_SEQ,
  ANSWERED,
  CALL_AT,
  CALL_BYTES,
  CALL_REGION,
  CALL_SEQ,
  CALLING,
  EXTERNAL_MB,
  SIDE_BYTES,
  SIDE_COUNT,
  HEAP_MB,
  SIDE_REGION,
  SIDE_AT,
  DATA_GIVEN,
  IDLE,
  NEEDS_DATA,
  OP_COMPLETED,
  OP_CREATE,
  OP_DISPOSE,
  OP_END,
  OP_EXPORT,
  OP_PICK,
  OP_ROUTED,
  Reader,
  SHARED_BYTES,
  ROUTER_WAITING,
  SIDE_KIND,
  SIDE_OP,
  STATE,
  WireOverflow,
  Writer,
} from './wire.ts';

export interface CageLimits {
  /** Longest the router waits for one pick, ms; past it the chain goes on without the plugin. */
  readonly callTimeoutMs: number;
  /** A call still running this long means a stuck worker: terminated, plugin quarantined. */
  readonly stuckAfterMs: number;
  /** create() and exportState(): they may build tables, so longer. */
  readonly setupTimeoutMs: number;
  /** The plugin's heap budget, MB: a plugin holding more after a call (or in buffers) is quarantined. */
  readonly heapMb: number;
  /**
   * V8's own cap on the worker's heap sits this far above the budget: what one
   * call may allocate before the check after it. Reaching V8's cap can abort
   * the whole process, not just the worker (nodejs/node#47224), so the
   * budget, checked by the worker after every call, is what stops a plugin.
   */
  readonly heapHeadroomMb: number;
  /** Starting the worker and importing the plugin. */
  readonly startTimeoutMs: number;
  /**
   * Both sides busy-wait this long before parking. Back-to-back calls then
   * skip a futex wake, but on a machine whose cores are busy the spinning
   * thread takes CPU from the one it waits for (bench:pick): default 0.
   */
  readonly spinMicros: number;
  /** Worker messages (log lines, output chunks) per second past which it is flooding. */
  readonly maxMessagesPerSecond: number;
  /**
   * 'process': the plugin's worker runs in a process of its own, so that nothing it
   * does (an abort at V8's heap cap, a native crash) can end the router; a pick
   * costs a round trip over a pipe more. 'thread': a worker thread of the router's.
   */
  readonly isolation: 'process' | 'thread';
}

export const DEFAULT_CAGE_LIMITS: CageLimits = {
  callTimeoutMs: 20,
  stuckAfterMs: 1000,
  setupTimeoutMs: 2000,
  heapMb: 64,
  heapHeadroomMb: 256,
  startTimeoutMs: 15_000,
  spinMicros: 0,
  maxMessagesPerSecond: 2000,
  // A thread cage saves a pipe round trip per pick and a process (docs/plugins.md), for plugins trusted not to abort the router.
  isolation: process.env.SWITCHYARD_PLUGIN_ISOLATION === 'thread' ? 'thread' : 'process',
};

export type QuarantineReason = 'stuck' | 'crashed' | 'memory' | 'flooding';

export interface CageStatus {
  readonly isolated: true;
  /** Where the plugin runs: a process of its own, or a worker thread of the router's. */
  readonly isolation: CageLimits['isolation'];
  /** The plugin's process id (isolation 'process'). */
  readonly pid?: number;
  readonly state: 'running' | 'quarantined' | 'stopped';
  readonly quarantine?: { readonly reason: QuarantineReason; readonly detail: string; readonly at: string };
  readonly instances: number;
  readonly calls: number;
  readonly timeouts: number;
  readonly busySkips: number;
  readonly threw: number;
  readonly limits: { readonly callTimeoutMs: number; readonly stuckAfterMs: number; readonly heapMb: number };
}

/** What the plugin module turned out to be. */
export type CageStart =
  | { readonly kind: 'ready'; readonly cage: PluginCage; readonly definition: DescribedDefinition }
  | { readonly kind: 'refused'; readonly hasDefault: boolean; readonly exports: readonly string[]; readonly problems: readonly string[] }
  | { readonly kind: 'threw'; readonly error: Error }
  | { readonly kind: 'failed'; readonly message: string };

export interface DescribedDefinition {
  readonly name: string;
  readonly version: string;
  readonly sdk: string;
  readonly description?: string;
  readonly configSchema?: Record<string, unknown>;
}

interface QueuedHook {
  readonly op: number;
  readonly instance: number;
  readonly now: number;
  readonly request?: RoutedRequest;
  readonly replica?: string;
  readonly ok?: boolean;
}

/** Hooks wait for the next call; this many force a call of their own. */
const MAX_QUEUED_HOOKS = 256;
/** Prefix hashes crossing either way (a request's, a kvIndex lookup's): as many as any prompt has blocks. */
const MAX_HASHES = 8192;
/** Token ids crossing either way: what the side region holds. */
const MAX_TOKEN_IDS = SIDE_REGION / 4;
/** An adapter name a kvIndex lookup carries. */
const MAX_STRING_ASKED = 256;
/** Plugin log lines passed on per 10 s; the rest are counted. */
const LOG_LINES_PER_WINDOW = 20;

export class PluginCage {
  readonly file: string;
  readonly limits: CageLimits;
  readonly #log?: Logger;
  readonly #worker: Worker;
  readonly #ctrl: Int32Array;
  readonly #shared: SharedArrayBuffer;
  readonly #side: DataView;
  readonly #call: Writer;
  readonly #strings = new StringTable();
  readonly #instances = new Map<number, CagedInstance>();
  #queue: QueuedHook[] = [];
  /** Requests of the message being answered, by op index: the worker may ask for their prefix hashes and token ids. */
  #requests: (RoutedRequest | undefined)[] = [];
  /** The context of each op's instance, by op index: the worker's kvIndex lookups are answered from its kvIndex. */
  #contexts: (StrategyContext | undefined)[] = [];
  #nextInstance = 1;
  #seq = 0;
  #state: CageStatus['state'] = 'running';
  #quarantine?: CageStatus['quarantine'];
  #retired = false;
  #busySince = 0;
  #stuckTimer?: NodeJS.Timeout;
  #lastExitError?: string;
  /** The plugin's process (isolation 'process'), ended with the cage. */
  readonly #pid?: number;
  #window = { start: 0, messages: 0, logStart: 0, logs: 0 };
  #stats = { calls: 0, timeouts: 0, busySkips: 0, threw: 0 };

  /** Starts a worker for the compiled plugin module at `moduleUrl` and reads its definition. */
  static async start(moduleUrl: string, file: string, limits: CageLimits = DEFAULT_CAGE_LIMITS, log?: Logger): Promise<CageStart> {
    const workerScript = await scriptPath(WORKER_ENTRY);
    const relay =
      limits.isolation === 'thread'
        ? undefined
        : await startRelay(
            {
              workerScript,
              spinMicros: limits.spinMicros,
              heapMb: limits.heapMb,
              heapHeadroomMb: limits.heapHeadroomMb,
              maxMessagesPerSecond: limits.maxMessagesPerSecond,
            },
            moduleUrl,
          );
    const shared = relay?.shared ?? new SharedArrayBuffer(SHARED_BYTES);
    const worker =
      relay?.worker ??
      new Worker(pathToFileURL(workerScript), {
        workerData: { shared, moduleUrl, spinMicros: limits.spinMicros, heapMb: limits.heapMb },
        // The router's environment holds its secrets (the admin token): none of it goes in.
        env: {},
        argv: [],
        execArgv: [],
        resourceLimits: {
          maxOldGenerationSizeMb: limits.heapMb + limits.heapHeadroomMb,
          maxYoungGenerationSizeMb: Math.max(4, Math.ceil(limits.heapMb / 8)),
          stackSizeMb: 4,
        },
        name: `switchyard plugin ${file}`,
      });
    worker.unref();
    let pid = relay?.pid();
    const first = await new Promise<{ type: string; [key: string]: unknown }>((resolve) => {
      const timer = setTimeout(() => resolve({ type: 'failed', message: `did not finish loading within ${limits.startTimeoutMs} ms` }), limits.startTimeoutMs);
      const done = (message: { type: string; [key: string]: unknown }) => {
        if (message?.type === 'pid') {
          pid = Number(message.pid) || undefined;
          return;
        }
        if (message?.type === 'process-exit') message = { type: 'failed', message: `its process ended while loading (${processEnd(message).detail})` };
        clearTimeout(timer);
        worker.off('message', done);
        resolve(message);
      };
      worker.on('message', done);
      worker.once('error', (error) => done({ type: 'failed', message: `its worker failed while loading: ${error.message}` }));
      worker.once('exit', (code) => done({ type: 'failed', message: `its worker exited while loading (code ${code})` }));
    });
    const definition = first.definition as DescribedDefinition | undefined;
    if (first.type === 'ready' && definition) {
      const cage = new PluginCage(worker, shared, file, limits, log, pid);
      cage.#warmUp();
      return { kind: 'ready', cage, definition };
    }
    void worker.terminate();
    kill(pid);
    if (first.type === 'ready') {
      return {
        kind: 'refused',
        hasDefault: first.hasDefault === true,
        exports: (first.exports as string[]) ?? [],
        problems: (first.problems as string[]) ?? [],
      };
    }
    if (first.type === 'load-error') return { kind: 'threw', error: Object.assign(new Error(String(first.message)), { stack: String(first.stack) }) };
    return { kind: 'failed', message: String(first.message) };
  }

  private constructor(worker: Worker, shared: SharedArrayBuffer, file: string, limits: CageLimits, log?: Logger, pid?: number) {
    this.#worker = worker;
    this.#pid = pid;
    this.#shared = shared;
    this.file = file;
    this.limits = limits;
    this.#log = log;
    this.#ctrl = new Int32Array(shared, 0, 16);
    this.#side = new DataView(shared, SIDE_AT, SIDE_REGION);
    this.#call = new Writer(shared, CALL_AT, CALL_REGION);
    worker.on('message', (message: { type?: string }) => this.#onMessage(message));
    worker.on('error', (error) => (this.#lastExitError = error.message));
    worker.on('exit', (code) => {
      if (this.#state !== 'running') return;
      this.#quarantineNow('crashed', `its worker exited (code ${code}${this.#lastExitError ? `: ${this.#lastExitError}` : ''})`);
    });
    // A 'message' listener refs the worker again: a plugin must never keep the process alive.
    worker.unref();
  }

  get state(): CageStatus['state'] {
    return this.#state;
  }

  status(): CageStatus {
    return {
      isolated: true,
      isolation: this.limits.isolation === 'thread' ? 'thread' : 'process',
      pid: this.#pid,
      state: this.#state,
      quarantine: this.#quarantine,
      instances: this.#instances.size,
      ...this.#stats,
      limits: { callTimeoutMs: this.limits.callTimeoutMs, stuckAfterMs: this.limits.stuckAfterMs, heapMb: this.limits.heapMb },
    };
  }

  /** Creates an instance in the worker (synchronously, like an inline create()). */
  create(config: unknown, ctx: StrategyContext): CagedInstance {
    if (this.#state !== 'running') throw new Error(this.#unavailable());
    const id = this.#nextInstance++;
    // The worker gets a seed drawn from the router's seeded source: the same seed, the same picks.
    const seed = Math.floor((typeof ctx.random === 'function' ? ctx.random() : Math.random()) * 0x1_0000_0000);
    // The worker's ctx.kvIndex asks this one, mid-call, through shared memory: 1 longestPrefix, 2 with longestPrefixOfTokens.
    const kv = ctx.kvIndex ? (typeof ctx.kvIndex.longestPrefixOfTokens === 'function' ? 2 : 1) : 0;
    const init = { config, pool: ctx.pool, weights: ctx.loadScoreWeights, seed, previousState: ctx.previousState, kv };
    let payload: Buffer;
    try {
      payload = serialize(init);
    } catch (error) {
      ctx.log?.warn(`strategy state handed over on reload is not cloneable (${(error as Error).message}); the new instance starts empty`);
      payload = serialize({ ...init, previousState: undefined });
    }
    const answer = this.#setupCall(OP_CREATE, id, now(ctx), ctx, payload);
    if (answer.kind === A_THREW) throw new Error(said(answer.message, 500));
    const instance = new CagedInstance(this, id, answer.flags, ctx);
    this.#instances.set(id, instance);
    return instance;
  }

  /** One pick; throws CageSkip when the plugin gives no usable answer in time. */
  pick(instance: CagedInstance, request: RoutedRequest, candidates: readonly Candidate[]): PickResult {
    const w = this.#begin();
    try {
      this.#requests.push(request);
      this.#contexts.push(instance.ctx);
      w.u8(OP_PICK);
      w.i32(instance.id);
      w.f64(now(instance.ctx));
      writeRequest(w, this.#strings, request);
      writeCandidates(w, this.#strings, candidates);
      w.u8(OP_END);
    } catch (error) {
      this.#abandon();
      if (error instanceof WireOverflow)
        throw new CageSkip('busy', 'too many candidates for the cage', `${candidates.length} candidates do not fit the cage's buffer`);
      throw error;
    }
    this.#stats.calls++;
    const started = performance.now();
    if (!this.#send(this.limits.callTimeoutMs)) {
      this.#stats.timeouts++;
      throw new CageSkip(
        'timeout',
        'no answer within its time budget',
        `no answer within ${this.limits.callTimeoutMs} ms (${(performance.now() - started).toFixed(1)} ms waited)`,
      );
    }
    let answer;
    try {
      answer = readPickAnswer(new Reader(this.#shared, ANSWER_AT, Atomics.load(this.#ctrl, ANSWER_BYTES)), candidates);
    } catch (error) {
      throw new CageSkip('bad_answer', 'answered something unreadable', `unreadable answer: ${(error as Error).message}`);
    }
    instance.lastPickMs = answer.pluginMs;
    this.#checkMemory();
    if (answer.kind === 'threw') {
      this.#stats.threw++;
      throw new Error(answer.message);
    }
    return answer.result;
  }

  /** Queues a hook; it reaches the worker with the next call, in order. */
  queueHook(instance: CagedInstance, op: number, request?: RoutedRequest, replica?: string, ok?: boolean): void {
    if (this.#state !== 'running') return;
    this.#queue.push({ op, instance: instance.id, now: now(instance.ctx), request, replica, ok });
    if (this.#queue.length >= MAX_QUEUED_HOOKS) this.#flush();
  }

  exportState(instance: CagedInstance): unknown {
    if (this.#state !== 'running') return undefined;
    const answer = this.#setupCall(OP_EXPORT, instance.id, now(instance.ctx), instance.ctx);
    if (answer.kind === A_THREW) throw new Error(said(answer.message, 500));
    return answer.state;
  }

  /** An instance is done with; the last one of a retired cage stops the worker. */
  release(instance: CagedInstance): void {
    if (!this.#instances.delete(instance.id)) return;
    this.queueHook(instance, OP_DISPOSE);
    if (this.#retired && this.#instances.size === 0) void this.close();
  }

  /** The loader has a newer version of the file: stop once no snapshot uses this one. */
  retire(): void {
    this.#retired = true;
    if (this.#instances.size === 0) void this.close();
  }

  async close(): Promise<void> {
    if (this.#state === 'stopped') return;
    if (this.#state === 'running') this.#state = 'stopped';
    this.#queue = [];
    clearTimeout(this.#stuckTimer);
    kill(this.#pid);
    await this.#worker.terminate().catch(() => {});
  }

  // ---- the call itself ----

  /**
   * One empty message before the first pick: the first round trip through code
   * not yet compiled (the relay's, the plugin process's, the worker's) takes
   * several times a warm one, which on a busy machine is past a pick's budget.
   */
  #warmUp(): void {
    try {
      const w = this.#begin();
      w.u8(OP_END);
      this.#send(this.limits.setupTimeoutMs);
    } catch (error) {
      if (!(error instanceof CageSkip)) throw error;
    }
  }

  /** Starts a message: checks the cage can take a call, then writes the queued hooks. */
  #begin(): Writer {
    if (this.#state === 'running') this.#checkMemory();
    if (this.#state !== 'running') throw new CageSkip('quarantined', this.#state === 'quarantined' ? 'quarantined' : 'stopped', this.#unavailable());
    if (this.#busy()) {
      this.#stats.busySkips++;
      if (performance.now() - this.#busySince >= this.limits.stuckAfterMs) {
        this.#quarantineNow('stuck', `a call has been running for over ${this.limits.stuckAfterMs} ms`);
        throw new CageSkip('quarantined', 'quarantined', this.#unavailable());
      }
      throw new CageSkip('busy', 'still busy with an earlier call', 'its worker is still busy with an earlier call');
    }
    const w = this.#call;
    const requests = this.#requests;
    const contexts = this.#contexts;
    requests.length = 0;
    contexts.length = 0;
    w.reset();
    try {
      w.i32(this.#strings.flags());
      const queue = this.#queue;
      for (let i = 0; i < queue.length; i++) {
        const hook = queue[i];
        w.u8(hook.op);
        w.i32(hook.instance);
        requests.push(hook.request);
        contexts.push(this.#instances.get(hook.instance)?.ctx);
        if (hook.op === OP_DISPOSE) continue;
        w.f64(hook.now);
        writeRequest(w, this.#strings, hook.request!);
        this.#strings.write(w, hook.replica!);
        if (hook.op === OP_COMPLETED) w.u8(hook.ok ? 1 : 0);
      }
    } catch (error) {
      if (!(error instanceof WireOverflow)) throw error;
      // Hooks that don't fit are dropped: the plugin's own bookkeeping drifts, the router does not stall.
      this.#abandon();
      this.#queue = [];
      this.#log?.warn('plugin hooks dropped: too many queued for one message', { plugin: this.file });
      return this.#begin();
    }
    this.#queue = [];
    return w;
  }

  /** What the worker measured after its last call: over budget, on or off its heap, it is quarantined. */
  #checkMemory(): void {
    const heap = Atomics.load(this.#ctrl, HEAP_MB);
    const external = Atomics.load(this.#ctrl, EXTERNAL_MB);
    if (heap > this.limits.heapMb) this.#quarantineNow('memory', `holds ${heap} MB on its heap, over its ${this.limits.heapMb} MB budget`);
    else if (external > this.limits.heapMb)
      this.#quarantineNow('memory', `holds ${external} MB off its heap (buffers), over its ${this.limits.heapMb} MB budget`);
  }

  #abandon(): void {
    this.#strings.clear();
    this.#forgetOps();
  }

  #forgetOps(): void {
    this.#requests.length = 0;
    this.#contexts.length = 0;
  }

  #busy(): boolean {
    const state = Atomics.load(this.#ctrl, STATE);
    return state === CALLING || state === NEEDS_DATA || state === DATA_GIVEN;
  }

  /** Sends the written message and waits for the answer; false when it did not come in time. */
  #send(timeoutMs: number): boolean {
    const ctrl = this.#ctrl;
    const seq = (this.#seq = (this.#seq + 1) | 0);
    Atomics.store(ctrl, CALL_BYTES, this.#call.length);
    Atomics.store(ctrl, CALL_SEQ, seq);
    Atomics.store(ctrl, ROUTER_WAITING, 1);
    Atomics.store(ctrl, STATE, CALLING);
    Atomics.notify(ctrl, STATE);
    const started = performance.now();
    const deadline = started + timeoutMs;
    const spinUntil = started + this.limits.spinMicros / 1000;
    for (;;) {
      const state = Atomics.load(ctrl, STATE);
      if (state === ANSWERED && Atomics.load(ctrl, ANSWER_SEQ) === seq) {
        Atomics.store(ctrl, ROUTER_WAITING, 0);
        this.#forgetOps();
        return true;
      }
      // What the worker asks mid-call is answered within the call's time: asking in a loop cannot hold the router.
      if (state === NEEDS_DATA) this.#answerAsk();
      const t = performance.now();
      if (t >= deadline) break;
      if (state === NEEDS_DATA) continue;
      if (t < spinUntil) continue;
      Atomics.wait(ctrl, STATE, state, deadline - t);
    }
    // No longer waiting: an ask already made gets an empty answer, a later one none (the worker sees this word).
    Atomics.store(ctrl, ROUTER_WAITING, 0);
    if (Atomics.load(ctrl, STATE) === NEEDS_DATA) {
      Atomics.store(ctrl, SIDE_COUNT, Atomics.load(ctrl, SIDE_KIND) === ASK_TOKENS ? -1 : 0);
      Atomics.store(ctrl, SIDE_BYTES, 0);
      Atomics.store(ctrl, STATE, DATA_GIVEN);
      Atomics.notify(ctrl, STATE);
    }
    this.#forgetOps();
    this.#busySince = started;
    clearTimeout(this.#stuckTimer);
    // Checked again without traffic: a looping worker burns a core until terminated.
    this.#stuckTimer = setTimeout(() => {
      if (this.#state === 'running' && this.#busy() && Atomics.load(ctrl, CALL_SEQ) === seq) {
        this.#quarantineNow('stuck', `a call has been running for over ${this.limits.stuckAfterMs} ms`);
      }
    }, this.limits.stuckAfterMs).unref();
    return false;
  }

  /** Answers what the worker asked mid-call (ctrl[SIDE_KIND]) in the side region; a bad ask gets an empty answer. */
  #answerAsk(): void {
    const ctrl = this.#ctrl;
    const side = this.#side;
    const op = Atomics.load(ctrl, SIDE_OP);
    const asked = Atomics.load(ctrl, SIDE_COUNT);
    let count = 0;
    let written = 0;
    try {
      switch (Atomics.load(ctrl, SIDE_KIND)) {
        case ASK_HASHES: {
          const hashes = this.#requests[op]?.prefixHashes ?? [];
          count = Math.min(hashes.length, MAX_HASHES);
          for (let i = 0; i < count; i++) side.setFloat64(i * 8, hashes[i], true);
          written = count * 8;
          break;
        }
        case ASK_TOKENS: {
          const ids = this.#requests[op]?.promptTokenIds;
          if (ids === undefined) count = -1;
          else {
            count = Math.min(ids.length, MAX_TOKEN_IDS);
            new Uint32Array(this.#shared, SIDE_AT, count).set(ids.subarray(0, count));
            written = count * 4;
          }
          break;
        }
        case ASK_KV_HASHES: {
          const kv = this.#contexts[op]?.kvIndex;
          const n = Math.max(0, Math.min(asked, MAX_HASHES));
          const hashes = new Array<number>(n);
          for (let i = 0; i < n; i++) hashes[i] = side.getFloat64(i * 8, true);
          [count, written] = kv ? this.#writeLookup(kv.longestPrefix(hashes)) : [0, 0];
          break;
        }
        case ASK_KV_TOKENS: {
          const kv = this.#contexts[op]?.kvIndex;
          const n = Math.max(0, Math.min(asked, MAX_TOKEN_IDS));
          const ids = new Uint32Array(this.#shared, SIDE_AT, n).slice();
          const r = new Reader(this.#shared, SIDE_AT + n * 4, SIDE_REGION - n * 4);
          const adapter = r.u8() === 1 ? r.str(MAX_STRING_ASKED) : undefined;
          [count, written] = kv?.longestPrefixOfTokens ? this.#writeLookup(kv.longestPrefixOfTokens(ids, adapter)) : [0, 0];
          break;
        }
      }
    } catch (error) {
      count = 0;
      written = 0;
      this.#log?.warn(`plugin ${this.file}: a kvIndex lookup for it failed: ${(error as Error).message}`, { plugin: this.file });
    }
    Atomics.store(ctrl, SIDE_COUNT, count);
    Atomics.store(ctrl, SIDE_BYTES, written);
    Atomics.store(ctrl, STATE, DATA_GIVEN);
    Atomics.notify(ctrl, STATE);
  }

  /** A lookup's entries in the side region: how many, and the bytes they take. */
  #writeLookup(entries: readonly CachedPrefix[]): [number, number] {
    const w = new Writer(this.#shared, SIDE_AT, SIDE_REGION);
    const count = writeCachedPrefixes(w, entries);
    return [count, w.length];
  }

  /** create() and exportState(): rare, so they may wait for a busy worker and take longer. */
  #setupCall(
    op: number,
    id: number,
    clock: number,
    ctx: StrategyContext,
    payload?: Uint8Array,
  ): { kind: number; message: string; flags: number; state?: unknown } {
    this.#awaitIdle(this.limits.stuckAfterMs);
    const w = this.#begin();
    this.#requests.push(undefined);
    this.#contexts.push(ctx);
    w.u8(op);
    w.i32(id);
    if (op === OP_CREATE) {
      w.f64(clock);
      if (payload!.length > CALL_REGION - w.length - 16) throw new Error('the config and handed-over state are too large for the cage');
      w.bytes(payload!);
    }
    w.u8(OP_END);
    if (!this.#send(this.limits.setupTimeoutMs)) {
      const what = op === OP_CREATE ? 'create()' : 'exportState()';
      this.#quarantineNow('stuck', `${what} did not return within ${this.limits.setupTimeoutMs} ms`);
      throw new Error(`${what} did not return within ${this.limits.setupTimeoutMs} ms; ${this.#unavailable()}`);
    }
    const r = new Reader(this.#shared, ANSWER_AT, Atomics.load(this.#ctrl, ANSWER_BYTES));
    const kind = r.u8();
    if (kind === A_THREW) {
      r.f64();
      return { kind, message: r.str(500), flags: 0 };
    }
    if (kind === A_DONE) return { kind, message: '', flags: op === OP_CREATE ? r.u8() : 0 };
    if (kind === A_STATE) return { kind, message: '', flags: 0, state: deserialize(r.bytes(CALL_REGION)) };
    throw new Error(`unexpected answer ${kind} from the plugin worker`);
  }

  #awaitIdle(ms: number): void {
    const deadline = performance.now() + ms;
    for (let state = Atomics.load(this.#ctrl, STATE); this.#busy(); state = Atomics.load(this.#ctrl, STATE)) {
      const left = deadline - performance.now();
      if (left <= 0) return;
      Atomics.wait(this.#ctrl, STATE, state, left);
    }
  }

  /** Queued hooks with no call to ride on. */
  #flush(): void {
    try {
      const w = this.#begin();
      w.u8(OP_END);
      this.#send(this.limits.callTimeoutMs);
    } catch (error) {
      if (!(error instanceof CageSkip)) throw error;
      this.#queue = [];
    }
  }

  // ---- faults ----

  #quarantineNow(reason: QuarantineReason, detail: string): void {
    if (this.#state !== 'running') return;
    this.#state = 'quarantined';
    // The detail may quote the worker's own last error: the plugin's words.
    detail = said(detail, 1000);
    this.#quarantine = { reason, detail, at: new Date().toISOString() };
    this.#queue = [];
    clearTimeout(this.#stuckTimer);
    this.#log?.warn(`plugin ${this.file} quarantined (${reason}): ${detail}; it is skipped until its file changes`, { plugin: this.file, reason, detail });
    kill(this.#pid);
    void this.#worker.terminate().catch(() => {});
    Atomics.store(this.#ctrl, STATE, IDLE);
  }

  #unavailable(): string {
    if (this.#state === 'quarantined') return `the plugin is quarantined (${this.#quarantine!.reason}: ${this.#quarantine!.detail}) until its file changes`;
    return 'the plugin was unloaded';
  }

  /** Counts what the worker sends: past the limit per second, it is flooding the router. */
  #tick(): boolean {
    const window = this.#window;
    const t = Date.now();
    if (t - window.start >= 1000) {
      window.start = t;
      window.messages = 0;
    }
    if (++window.messages > this.limits.maxMessagesPerSecond) {
      this.#quarantineNow('flooding', `sent over ${this.limits.maxMessagesPerSecond} messages in a second`);
      return false;
    }
    return true;
  }

  /** At most LOG_LINES_PER_WINDOW lines of a plugin's output per 10 s reach the router's log. */
  #logAllowed(): boolean {
    const window = this.#window;
    const t = Date.now();
    if (t - window.logStart >= 10_000) {
      window.logStart = t;
      window.logs = 0;
    }
    return ++window.logs <= LOG_LINES_PER_WINDOW;
  }

  #onMessage(message: { type?: string; [key: string]: unknown }): void {
    if (!this.#tick() || message === null || typeof message !== 'object') return;
    if (message.type === 'memory') {
      this.#checkMemory();
    } else if (message.type === 'flooding') {
      // Counted in the plugin's process, where the worker's messages arrive at the rate it sends them.
      this.#quarantineNow('flooding', `sent over ${this.limits.maxMessagesPerSecond} messages in a second`);
    } else if (message.type === 'process-exit') {
      const end = processEnd(message);
      this.#quarantineNow(end.reason, end.detail);
    } else if (message.type === 'log') {
      const instance = this.#instances.get(Number(message.instance));
      if (!instance || !this.#logAllowed()) return;
      const text = said(message.message, 1000);
      const fields = message.fields !== null && typeof message.fields === 'object' ? boundedFields(message.fields as Record<string, unknown>) : undefined;
      if (message.level === 'warn') instance.ctx.log?.warn(text, fields);
      else instance.ctx.log?.info(text, fields);
    } else if (message.type === 'output' && this.#logAllowed()) {
      this.#log?.info(`plugin ${this.file} printed: ${said(message.text, 500).trimEnd()}`, { plugin: this.file });
    } else if (message.type === 'hook-error' && this.#logAllowed()) {
      this.#log?.warn(`plugin ${this.file}: ${said(message.hook, 20)}() threw: ${said(message.message, 500)}`, { plugin: this.file });
    }
  }
}

/** What a plugin's log fields may carry into the router's log: a few short scalars. */
function boundedFields(fields: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  let n = 0;
  for (const key of Object.keys(fields)) {
    if (n++ >= 16) break;
    const value = fields[key];
    out[said(key, 64)] = typeof value === 'number' || typeof value === 'boolean' ? value : said(value, 200);
  }
  return out;
}

/**
 * Text a plugin wrote, as the router's log and state may carry it: scrubbed of
 * the router's secrets (a plugin can read them from /proc/self/environ), then
 * cut to `max` characters (after, so a cut secret shows none of itself).
 */
function said(text: unknown, max: number): string {
  return redactSecrets(String(text).slice(0, max + 4096)).slice(0, max);
}

/** Ends a plugin's process at once (it may be inside a call that never returns); gone already is fine. */
function kill(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {}
}

/**
 * Why a plugin's process ended, as the relay reported it: out of memory when V8
 * said so (its heap cap reached inside one call aborts the process; a worker
 * stopped at it exits with ERR_WORKER_OUT_OF_MEMORY), a crash otherwise.
 */
function processEnd(message: Record<string, unknown>): { reason: QuarantineReason; detail: string } {
  const stderr = typeof message.stderr === 'string' ? message.stderr : '';
  const worker = (message.worker ?? {}) as { code?: unknown; message?: unknown; errorCode?: unknown };
  const how = message.signal ? `killed by ${String(message.signal)}` : `exit code ${String(message.code)}`;
  const fatal = /FATAL ERROR: [^\n]*/.exec(stderr)?.[0];
  if (worker.errorCode === 'ERR_WORKER_OUT_OF_MEMORY' || (fatal && /heap limit|out of memory/i.test(fatal))) {
    return { reason: 'memory', detail: `its process ran out of memory inside one call (${fatal ?? String(worker.message)})` };
  }
  if (typeof message.detail === 'string') return { reason: 'crashed', detail: `its process ${message.detail}` };
  const last = fatal ?? (typeof worker.message === 'string' ? worker.message : stderr.trim().split('\n').at(-1));
  return { reason: 'crashed', detail: `its process ended (${how}${last ? `: ${last}` : ''})` };
}

function now(ctx: StrategyContext): number {
  return typeof ctx.now === 'function' ? ctx.now() : Date.now();
}

/** The router's handle on one instance living in a cage: a StrategyInstance like any other. */
export class CagedInstance implements StrategyInstance {
  /** How long the plugin itself spent on the last pick, ms (the round trip excluded): what its budget is held to. */
  lastPickMs = 0;
  readonly #cage: PluginCage;
  readonly #flags: number;
  #disposed = false;

  constructor(
    cage: PluginCage,
    readonly id: number,
    flags: number,
    readonly ctx: StrategyContext,
  ) {
    this.#cage = cage;
    this.#flags = flags;
  }

  pick(request: RoutedRequest, candidates: readonly Candidate[]): PickResult {
    return this.#cage.pick(this, request, candidates);
  }

  onRouted(request: RoutedRequest, replica: string): void {
    if (this.#flags & 1) this.#cage.queueHook(this, OP_ROUTED, request, replica);
  }

  onCompleted(request: RoutedRequest, replica: string, ok: boolean): void {
    if (this.#flags & 2) this.#cage.queueHook(this, OP_COMPLETED, request, replica, ok);
  }

  exportState(): unknown {
    return this.#flags & 4 ? this.#cage.exportState(this) : undefined;
  }

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#cage.release(this);
  }
}
