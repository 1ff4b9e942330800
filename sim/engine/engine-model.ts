// One vLLM/SGLang replica as a discrete-step model: continuous batching over
// a FIFO waiting queue, chunked prefill within a per-step token budget, one
// decode token per running sequence per step, a paged KV cache with prefix
// caching, preemption by recompute when KV runs out, and LoRA slots. The same
// code runs on a virtual clock in the simulator and on scaled real time in the
// emulator, so the per-step loop allocates nothing and per-token callbacks are
// optional.
import type { Clock, TimerHandle } from '../clock.ts';
import { KvCache, type KvHolding, type KvCacheListener } from './kv-cache.ts';
import { LoraSlots } from './lora-slots.ts';
import { blockCount, NO_BLOCKS, type PromptBlocks } from './prompt-blocks.ts';
import { validateProfile, type EngineProfile } from './profiles.ts';
import { chunkAttentionPairs, stepTimeMs, type StepWork } from './step-time.ts';
import type { EngineMetrics, EngineRequest, EngineResult, FinishReason } from './types.ts';

const WAITING = 0;
const RUNNING = 1;
const DONE = 2;

class Sequence {
  readonly request: EngineRequest;
  // Copied from the request so that the per-step loops touch one object a sequence.
  readonly maxTokens: number;
  readonly wantsTokens: boolean;
  readonly prompt: PromptBlocks;
  readonly arrivedAt: number;
  /**
   * Blocks that may be cached: those the request describes (its prompt's,
   * then its output's), at most the full blocks of prompt plus output.
   */
  readonly hashLimit: number;
  /** The KV blocks held (from the engine's pool of holdings). */
  holding: KvHolding;
  numBlocks = 0;
  state = WAITING;
  /** Prompt plus generated tokens; the last generated one has no KV yet. */
  numTokens: number;
  /** Tokens whose KV is in the cache. */
  numComputed = 0;
  outputTokens = 0;
  cachedTokens = 0;
  admitted = false;
  /** Leading blocks already registered in the prefix cache. */
  hashedBlocks = 0;
  /** Tokens scheduled in the step in flight. */
  scheduled = 0;
  preempted = 0;
  firstTokenAt = NaN;

  constructor(request: EngineRequest, arrivedAt: number, blockSize: number, holding: KvHolding) {
    this.request = request;
    this.maxTokens = request.maxTokens;
    this.wantsTokens = request.onToken !== undefined;
    this.prompt = request.blocks ?? NO_BLOCKS;
    this.arrivedAt = arrivedAt;
    this.numTokens = request.promptTokens;
    this.hashLimit = Math.min(blockCount(this.prompt), Math.floor((request.promptTokens + request.maxTokens) / blockSize));
    this.holding = holding;
  }
}

export interface EngineOptions {
  /** Adapters to load into GPU slots at start, at no cost (up to max_loras). */
  readonly preloadAdapters?: readonly string[];
  /**
   * Steps run back to back, before yielding to the event loop, when the clock
   * is already past their end (real time at a high speed factor, where timers
   * fire later than asked).
   */
  readonly maxCatchUpSteps?: number;
  /**
   * Runs stretches of identical decode steps (nothing waiting, no prefill, no
   * request finishing, KV enough) as one timer instead of one per step, when
   * no running request asks for per-token callbacks. Token, finish and step
   * times, KV usage as observed, and the step statistics are the per-step
   * model's. Default off (the simulator turns it on).
   */
  readonly fastForward?: boolean;
}

export class EngineModel {
  readonly profile: EngineProfile;
  private readonly clock: Clock;
  private readonly kv: KvCache;
  private readonly lora: LoraSlots;
  private readonly maxCatchUpSteps: number;
  private readonly fastForward: boolean;
  // A fast-forward window: steps 0..windowSteps-1 of one unchanging decode batch, each
  // windowStepMs long, ending at stepEnd. Steps up to windowBuilt are applied (built; the ones
  // before it completed); windowBuiltAt is when step windowBuilt started. windowSteps 0: no window.
  private windowSteps = 0;
  private windowBuilt = 0;
  private windowBuiltAt = 0;
  private windowStepMs = 0;
  private readonly byId = new Map<string, Sequence>();
  /** Holdings of finished requests, reused (no allocation per request). */
  private readonly holdings: KvHolding[] = [];
  private running: Sequence[] = [];
  // FIFO with a moving head; preempted requests go back in front of it.
  // Entries [waitingHead, waitingEnd) are the queue; the array never shrinks
  // (setting an array's length is a slow path, and frees storage the next push needs again).
  private readonly waiting: (Sequence | undefined)[] = [];
  private waitingHead = 0;
  private waitingEnd = 0;
  private waitingLive = 0;
  private readonly work: StepWork = { prefillTokens: 0, decodeTokens: 0, attentionPairs: 0, distinctAdapters: 0, adapterLoads: 0 };

  private prefixQueries = 0;
  private prefixHits = 0;
  private preemptionCount = 0;
  private promptTokenCount = 0;
  private generationTokenCount = 0;
  private readonly finishedCounts: Record<FinishReason, number> = { length: 0, stop: 0, abort: 0 };
  private stepCount = 0;
  private distinctAdapterSum = 0;
  private batchSizeSum = 0;
  /** Steps by the number of requests in their batch. */
  private readonly batchSizes: Float64Array;

  /** A step is in flight or about to start. */
  private busy = false;
  private completing = false;
  private runningDirty = false;
  private stepEnd = 0;
  private timer: TimerHandle | undefined;

  constructor(profile: EngineProfile, clock: Clock, options: EngineOptions = {}) {
    validateProfile(profile);
    this.profile = profile;
    this.clock = clock;
    this.kv = new KvCache(profile.numGpuBlocks, profile.blockSize);
    this.lora = new LoraSlots(profile.maxLoras);
    this.batchSizes = new Float64Array(profile.maxNumSeqs + 1);
    this.maxCatchUpSteps = options.maxCatchUpSteps ?? 64;
    this.fastForward = options.fastForward ?? false;
    for (const adapter of options.preloadAdapters ?? []) this.lora.preload(adapter);
  }

  get runningCount(): number {
    return this.running.length;
  }

  get waitingCount(): number {
    return this.waitingLive;
  }

  get kvUsage(): number {
    if (this.windowSteps > 0) this.syncWindow();
    return this.kv.usage;
  }

  /** Mean over non-empty steps of the requests in the batch. */
  get meanBatchSize(): number {
    if (this.windowSteps > 0) this.syncWindow();
    return this.stepCount === 0 ? 0 : this.batchSizeSum / this.stepCount;
  }

  /** Element b: the number of steps that ran a batch of b requests. */
  batchSizeHistogram(): number[] {
    if (this.windowSteps > 0) this.syncWindow();
    return Array.from(this.batchSizes);
  }

  /** Queues a request; it joins the batch at the next step. Throws on a request the engine would refuse. */
  submit(request: EngineRequest): void {
    const { id, promptTokens, maxTokens } = request;
    if (this.byId.has(id)) throw new Error(`request id '${id}' is already in the engine`);
    if (!Number.isInteger(promptTokens) || promptTokens < 1) throw new RangeError(`request '${id}': promptTokens must be a positive integer`);
    if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new RangeError(`request '${id}': maxTokens must be a positive integer`);
    if (promptTokens + maxTokens > this.profile.maxModelLen) {
      throw new RangeError(`request '${id}': ${promptTokens} prompt + ${maxTokens} output tokens exceed max_model_len ${this.profile.maxModelLen}`);
    }
    if (request.adapter !== undefined && this.profile.maxLoras === 0) throw new Error(`request '${id}': this engine serves no LoRA adapters`);
    if (this.windowSteps > 0) this.cutWindow();
    const seq = new Sequence(request, this.clock.now(), this.profile.blockSize, this.holdings.pop() ?? this.kv.newHolding());
    this.byId.set(id, seq);
    if (this.waitingEnd === this.waiting.length) this.waiting.push(seq);
    else this.waiting[this.waitingEnd] = seq;
    this.waitingEnd++;
    this.waitingLive++;
    if (!this.busy) {
      // A zero delay lets requests submitted at the same moment start in one step.
      this.busy = true;
      this.timer = this.clock.schedule(0, this.onKick);
    }
  }

  /**
   * Aborts a request, freeing its KV blocks at once; its onFinish sees
   * 'abort'. False when the id is unknown or already finished.
   */
  cancel(id: string): boolean {
    const seq = this.byId.get(id);
    if (!seq || seq.state === DONE) return false;
    if (this.windowSteps > 0) this.cutWindow();
    const t = this.clock.now();
    if (seq.state === WAITING) {
      // Left in the queue array; the scheduler drops it when it gets there.
      this.waitingLive--;
    } else {
      this.release(seq);
      if (this.completing) this.runningDirty = true;
      else this.running.splice(this.running.indexOf(seq), 1);
    }
    this.finish(seq, 'abort', t);
    return true;
  }

  /** Aborts every request and stops stepping (the emulator's shutdown). */
  stop(): void {
    if (this.windowSteps > 0) this.cutWindow();
    this.timer?.cancel();
    this.timer = undefined;
    for (const id of [...this.byId.keys()]) this.cancel(id);
    // Called from a callback inside a step, the step loop is still on the stack and ends itself.
    this.busy = this.completing;
  }

  /** Reports blocks entering and leaving the prefix cache (KV events); undefined stops reporting. */
  setKvListener(listener: KvCacheListener | undefined): void {
    this.kv.listener = listener;
  }

  /** Every block in the prefix cache as [stream, block] (a check for tests: costs per block). */
  cachedBlockIds(): [number, number][] {
    if (this.windowSteps > 0) this.syncWindow();
    return [...this.kv.cachedBlockIds()];
  }

  isAdapterLoaded(adapter: string): boolean {
    return this.lora.isLoaded(adapter);
  }

  /** Puts an adapter in a GPU slot now, at no cost; false when every slot is in use. */
  preloadAdapter(adapter: string): boolean {
    return this.profile.maxLoras > 0 && this.lora.preload(adapter);
  }

  /** Frees an idle adapter's slot; false when it is not loaded or a running request uses it. */
  evictAdapter(adapter: string): boolean {
    return this.lora.evict(adapter);
  }

  snapshot(): EngineMetrics {
    if (this.windowSteps > 0) this.syncWindow();
    const waitingAdapters = new Set<string>();
    for (let i = this.waitingHead; i < this.waitingEnd; i++) {
      const seq = this.waiting[i];
      if (seq && seq.state === WAITING && seq.request.adapter !== undefined) waitingAdapters.add(seq.request.adapter);
    }
    return {
      running: this.running.length,
      waiting: this.waitingLive,
      kvUsage: this.kv.usage,
      blockSize: this.profile.blockSize,
      numGpuBlocks: this.profile.numGpuBlocks,
      prefixCacheQueries: this.prefixQueries,
      prefixCacheHits: this.prefixHits,
      preemptions: this.preemptionCount,
      promptTokens: this.promptTokenCount,
      generationTokens: this.generationTokenCount,
      finished: { ...this.finishedCounts },
      maxLoras: this.profile.maxLoras,
      loadedAdapters: this.lora.loaded(),
      runningAdapters: this.lora.running(),
      waitingAdapters: [...waitingAdapters],
      meanDistinctAdapters: this.stepCount === 0 ? 0 : this.distinctAdapterSum / this.stepCount,
      steps: this.stepCount,
    };
  }

  private readonly onKick = (): void => {
    this.timer = undefined;
    this.runFrom(this.clock.now());
  };

  private readonly onStepEnd = (): void => {
    this.timer = undefined;
    this.complete(this.stepEnd);
    this.runFrom(this.stepEnd);
  };

  /** Runs steps from time `t` until one ends in the future (then waits for it) or there is no work. */
  private runFrom(t: number): void {
    for (let n = 0; ; n++) {
      let duration = this.buildBatch(t);
      if (duration < 0 && this.waitingLive > 0 && this.clock.now() > t) {
        // Idle at t, but requests arrived since (the clock ran ahead of the model): start now.
        t = this.clock.now();
        duration = this.buildBatch(t);
      }
      if (duration < 0) {
        this.busy = false;
        return;
      }
      this.stepEnd = t + duration;
      if (this.fastForward && this.startWindow(t, duration)) return;
      const ahead = this.stepEnd - this.clock.now();
      if (ahead > 0 || n >= this.maxCatchUpSteps) {
        this.timer = this.clock.schedule(Math.max(0, ahead), this.onStepEnd);
        return;
      }
      this.complete(this.stepEnd);
      t = this.stepEnd;
    }
  }

  /**
   * Called with step 0 just built (starting at `start`, `duration` long):
   * when it is a decode-only batch that the next steps would repeat exactly,
   * schedules one timer for the end of the stretch instead of one per step.
   */
  private startWindow(start: number, duration: number): boolean {
    if (this.waitingLive > 0) return false;
    const work = this.work;
    if (work.prefillTokens !== 0 || work.adapterLoads !== 0) return false;
    const running = this.running;
    const count = running.length;
    if (count === 0 || count > this.profile.maxNumBatchedTokens) return false;
    let steps = Infinity;
    for (let i = 0; i < count; i++) {
      const seq = running[i];
      if (seq.scheduled !== 1 || seq.outputTokens === 0 || seq.wantsTokens) return false;
      const left = seq.maxTokens - seq.outputTokens;
      if (left < steps) steps = left;
    }
    // Step `steps - 1` is the first in which a request finishes: the window ends with it.
    if (steps < 2) return false;
    // The blocks steps 1..steps-1 need must be free: then nothing is preempted.
    const blockSize = this.profile.blockSize;
    let need = 0;
    for (let i = 0; i < count; i++) {
      const seq = running[i];
      need += Math.ceil((seq.numComputed + steps) / blockSize) - seq.numBlocks;
    }
    if (need > this.kv.freeBlocks) return false;
    let end = start;
    for (let k = 0; k < steps; k++) end += duration;
    this.windowSteps = steps;
    this.windowBuilt = 0;
    this.windowBuiltAt = start;
    this.windowStepMs = duration;
    this.stepEnd = end;
    this.timer = this.clock.schedule(Math.max(0, end - this.clock.now()), this.onWindowEnd);
    return true;
  }

  private readonly onWindowEnd = (): void => {
    this.timer = undefined;
    this.advanceWindow(this.windowSteps - 1);
    this.windowSteps = 0;
    this.complete(this.stepEnd);
    this.runFrom(this.stepEnd);
  };

  /** Applies the window's steps that have started by now (one starting exactly now has not, as in the per-step model). */
  private syncWindow(): void {
    const now = this.clock.now();
    const d = this.windowStepMs;
    let built = this.windowBuilt;
    let at = this.windowBuiltAt;
    while (built < this.windowSteps - 1 && at + d < now) {
      at += d;
      built++;
    }
    this.advanceWindow(built);
  }

  /** Ends the window at the step in flight now: the engine goes on step by step from its end. */
  private cutWindow(): void {
    this.syncWindow();
    this.windowSteps = 0;
    this.timer?.cancel();
    this.stepEnd = this.windowBuiltAt + this.windowStepMs;
    this.timer = this.clock.schedule(Math.max(0, this.stepEnd - this.clock.now()), this.onStepEnd);
  }

  /**
   * Completes the window's steps before `built` and builds step `built`:
   * what complete() and buildBatch() would have done, in bulk.
   */
  private advanceWindow(built: number): void {
    const steps = built - this.windowBuilt;
    if (steps <= 0) return;
    const blockSize = this.profile.blockSize;
    const kv = this.kv;
    const running = this.running;
    const count = running.length;
    for (let i = 0; i < count; i++) {
      const seq = running[i];
      seq.numComputed += steps;
      seq.numTokens += steps;
      seq.outputTokens += steps;
      const need = Math.ceil((seq.numComputed + 1) / blockSize) - seq.numBlocks;
      if (need > 0) {
        kv.allocate(seq.holding, need);
        seq.numBlocks += need;
      }
      // Output blocks the skipped steps and the step now built filled (most windows fill none).
      if (seq.hashedBlocks < seq.hashLimit && seq.numComputed + 1 >= (seq.hashedBlocks + 1) * blockSize) this.cacheFilled(seq, seq.numComputed + 1);
    }
    this.generationTokenCount += steps * count;
    this.stepCount += steps;
    this.distinctAdapterSum += steps * this.work.distinctAdapters;
    this.batchSizeSum += steps * count;
    this.batchSizes[count] += steps;
    let at = this.windowBuiltAt;
    for (let k = 0; k < steps; k++) at += this.windowStepMs;
    this.windowBuiltAt = at;
    this.windowBuilt = built;
  }

  /**
   * Decides the next step's batch, as vLLM V1's scheduler does: running
   * requests first (continuing prefills and decodes), preempting the newest
   * running request while KV runs short; then, if nothing was preempted,
   * waiting requests in order while the batch, the token budget and the KV
   * cache allow. Returns the step's duration, or -1 when there is no work.
   */
  private buildBatch(start: number): number {
    const profile = this.profile;
    const kv = this.kv;
    const work = this.work;
    work.prefillTokens = 0;
    work.decodeTokens = 0;
    work.attentionPairs = 0;
    work.adapterLoads = 0;
    let budget = profile.maxNumBatchedTokens;
    let preempted = false;

    const blockSize = profile.blockSize;
    const running = this.running;
    let decodes = 0;
    for (let i = 0; i < running.length; i++) {
      const seq = running[i];
      if (budget === 0) break;
      const computed = seq.numComputed;
      const remaining = seq.numTokens - computed;
      const tokens = remaining < budget ? remaining : budget;
      const end = computed + tokens;
      if (end > seq.numBlocks * blockSize) {
        const need = Math.ceil(end / blockSize) - seq.numBlocks;
        while (kv.freeBlocks < need) {
          const victim = running[running.length - 1];
          this.preempt(victim);
          preempted = true;
          if (victim === seq) break;
        }
        if (seq.state !== RUNNING) break;
        kv.allocate(seq.holding, need);
        seq.numBlocks += need;
      }
      if (tokens === 1 && seq.outputTokens > 0) {
        // A decode: one token; it may fill a block of output, which is cached as a prompt's is.
        seq.scheduled = 1;
        decodes++;
        if (end >= (seq.hashedBlocks + 1) * blockSize && seq.hashedBlocks < seq.hashLimit) this.cacheFilled(seq, end);
      } else {
        this.scheduleChunk(seq, tokens);
      }
      budget -= tokens;
    }
    work.decodeTokens += decodes;

    if (!preempted) budget = this.admitWaiting(budget, start);

    if (work.prefillTokens + work.decodeTokens === 0) return -1;
    work.distinctAdapters = this.lora.activeCount;
    this.stepCount++;
    this.distinctAdapterSum += work.distinctAdapters;
    this.batchSizeSum += running.length;
    this.batchSizes[running.length]++;
    return stepTimeMs(profile, work);
  }

  /**
   * Moves waiting requests that had arrived by the step's start into the
   * batch; returns the token budget left.
   */
  private admitWaiting(budget: number, start: number): number {
    const profile = this.profile;
    const blockSize = profile.blockSize;
    const kv = this.kv;
    const running = this.running;
    let i = this.waitingHead;
    while (budget > 0 && running.length < profile.maxNumSeqs && i < this.waitingEnd) {
      const seq = this.waiting[i]!;
      if (seq.state !== WAITING) {
        i = this.removeWaiting(i);
        continue;
      }
      // The queue is in arrival order: the rest arrived later still. (Only a clock
      // running ahead of the model, real time at high speed, gets here.)
      if (seq.arrivedAt > start) break;
      const adapter = seq.request.adapter;
      // Every slot busy with another adapter: skip it, as vLLM does, and try the next.
      if (adapter !== undefined && !this.lora.canAcquire(adapter)) {
        i++;
        continue;
      }
      // At least one token is always computed, so a fully cached prompt still yields a token.
      const maxHitBlocks = Math.min(Math.floor((seq.numTokens - 1) / blockSize), seq.hashLimit);
      const hitBlocks = maxHitBlocks > 0 ? kv.lookup(seq.prompt, maxHitBlocks) : 0;
      const hitTokens = hitBlocks * blockSize;
      const remaining = seq.numTokens - hitTokens;
      const tokens = remaining < budget ? remaining : budget;
      const need = kv.blocksFor(hitTokens + tokens) - hitBlocks;
      if (need + (hitBlocks > 0 ? kv.unreferencedFound : 0) > kv.freeBlocks) break;

      i = this.removeWaiting(i);
      this.waitingLive--;
      kv.acquireFound(seq.holding, seq.prompt, hitBlocks);
      kv.allocate(seq.holding, need);
      seq.numBlocks = hitBlocks + need;
      seq.numComputed = hitTokens;
      seq.hashedBlocks = hitBlocks;
      if (!seq.admitted) {
        seq.admitted = true;
        seq.cachedTokens = hitTokens;
      }
      this.prefixQueries += seq.numTokens;
      this.prefixHits += hitTokens;
      if (adapter !== undefined && this.lora.acquire(adapter)) this.work.adapterLoads++;
      seq.state = RUNNING;
      running.push(seq);
      this.scheduleChunk(seq, tokens);
      budget -= tokens;
    }
    return budget;
  }

  private scheduleChunk(seq: Sequence, tokens: number): void {
    seq.scheduled = tokens;
    const work = this.work;
    if (tokens === 1 && seq.outputTokens > 0) {
      work.decodeTokens++;
      return;
    }
    work.prefillTokens += tokens;
    work.attentionPairs += chunkAttentionPairs(seq.numComputed, tokens);
    this.cacheFilled(seq, seq.numComputed + tokens);
  }

  /** vLLM caches a block as soon as a step that fills it is scheduled: `tokens` will have KV once this step ends. */
  private cacheFilled(seq: Sequence, tokens: number): void {
    const full = Math.min(Math.floor(tokens / this.profile.blockSize), seq.hashLimit);
    if (full > seq.hashedBlocks) {
      this.kv.cache(seq.holding, seq.prompt, seq.hashedBlocks, full);
      seq.hashedBlocks = full;
    }
  }

  /** Applies a finished step at time t: computed tokens, sampled tokens, finished requests. */
  private complete(t: number): void {
    this.completing = true;
    const running = this.running;
    let kept = 0;
    for (let r = 0; r < running.length; r++) {
      const seq = running[r];
      if (seq.state !== RUNNING) continue;
      const tokens = seq.scheduled;
      if (tokens > 0) {
        seq.scheduled = 0;
        seq.numComputed += tokens;
        if (seq.numComputed === seq.numTokens) this.emitToken(seq, t);
        if (seq.state !== RUNNING) continue;
      }
      // Stores only behind a finished request's gap: a store into this long-lived array costs a write barrier.
      if (kept !== r) running[kept] = seq;
      kept++;
    }
    // pop, not a length write: that is a runtime call (12% of this function's time in a profile).
    while (running.length > kept) running.pop();
    if (this.runningDirty) {
      // A callback cancelled a request this loop had already kept.
      this.running = running.filter((seq) => seq.state === RUNNING);
      this.runningDirty = false;
    }
    this.completing = false;
  }

  private emitToken(seq: Sequence, t: number): void {
    const request = seq.request;
    const index = seq.outputTokens++;
    seq.numTokens++;
    this.generationTokenCount++;
    if (index === 0) {
      seq.firstTokenAt = t;
      this.promptTokenCount += request.promptTokens;
      request.onFirstToken?.(t);
      if (seq.state !== RUNNING) return; // cancelled by the callback
    }
    if (seq.wantsTokens) request.onToken!(index, t);
    if (seq.outputTokens === seq.maxTokens && seq.state === RUNNING) {
      this.release(seq);
      this.finish(seq, request.finishReason ?? 'length', t);
    }
  }

  /** Recompute preemption of the last running request: its KV is dropped and it waits at the front. */
  private preempt(seq: Sequence): void {
    this.running.pop();
    this.release(seq);
    seq.numComputed = 0;
    seq.hashedBlocks = 0;
    seq.scheduled = 0;
    seq.state = WAITING;
    seq.preempted++;
    this.preemptionCount++;
    if (this.waitingHead > 0) {
      this.waiting[--this.waitingHead] = seq;
    } else {
      if (this.waitingEnd === this.waiting.length) this.waiting.push(undefined);
      this.waiting.copyWithin(1, 0, this.waitingEnd);
      this.waiting[0] = seq;
      this.waitingEnd++;
    }
    this.waitingLive++;
  }

  private release(seq: Sequence): void {
    this.kv.release(seq.holding);
    seq.numBlocks = 0;
    if (seq.request.adapter !== undefined) this.lora.release(seq.request.adapter);
  }

  /** Takes entry i out of the waiting queue; returns the index of the entry that followed it. */
  private removeWaiting(i: number): number {
    const waiting = this.waiting;
    if (i !== this.waitingHead) {
      waiting.copyWithin(i, i + 1, this.waitingEnd);
      waiting[--this.waitingEnd] = undefined;
      return i;
    }
    waiting[i] = undefined;
    this.waitingHead++;
    if (this.waitingHead === this.waitingEnd) {
      this.waitingHead = 0;
      this.waitingEnd = 0;
    } else if (this.waitingHead > 1024 && this.waitingHead * 2 > this.waitingEnd) {
      const live = this.waitingEnd - this.waitingHead;
      waiting.copyWithin(0, this.waitingHead, this.waitingEnd);
      waiting.fill(undefined, live, this.waitingEnd);
      this.waitingHead = 0;
      this.waitingEnd = live;
    }
    return this.waitingHead;
  }

  private finish(seq: Sequence, reason: FinishReason, t: number): void {
    seq.state = DONE;
    // Its blocks were released (or it never held any): the holding goes back to the pool.
    this.holdings.push(seq.holding);
    this.byId.delete(seq.request.id);
    this.finishedCounts[reason]++;
    const result: EngineResult = {
      id: seq.request.id,
      promptTokens: seq.request.promptTokens,
      outputTokens: seq.outputTokens,
      cachedTokens: seq.cachedTokens,
      finishReason: reason,
      preempted: seq.preempted,
      arrivedAt: seq.arrivedAt,
      firstTokenAt: seq.firstTokenAt,
    };
    seq.request.onFinish?.(result, t);
  }
}
