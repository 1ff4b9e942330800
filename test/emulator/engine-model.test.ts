import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EngineModel } from '../../sim/engine/engine-model.ts';
import { PROFILES, getProfile, type EngineProfile } from '../../sim/engine/profiles.ts';
import { blocksOfHashes } from '../../sim/engine/prompt-blocks.ts';
import type { EngineRequest, EngineResult } from '../../sim/engine/types.ts';
import { VirtualClock } from './virtual-clock.ts';

// The tiny profile: β0 5 ms, β1 0.02 ms, β2 0.01 ms, 64 blocks of 16, 4 sequences,
// a 256-token step budget, 2 LoRA slots (20 ms to load, 1 ms per adapter per step).
const tiny = PROFILES.tiny;

function setup(overrides: Partial<EngineProfile> = {}) {
  const clock = new VirtualClock();
  const engine = new EngineModel({ ...tiny, ...overrides }, clock);
  const results = new Map<string, EngineResult>();
  const tokenTimes = new Map<string, number[]>();
  const submit = (request: EngineRequest, everyToken?: () => void) => {
    const times: number[] = [];
    tokenTimes.set(request.id, times);
    engine.submit({
      ...request,
      onToken(index, t) {
        assert.equal(index, times.length, `token ${index} of ${request.id} out of order`);
        times.push(t);
        everyToken?.();
      },
      onFinish(result) {
        results.set(result.id, result);
      },
    });
  };
  return { clock, engine, results, tokenTimes, submit };
}

/** Hashes for `blocks` prompt blocks of a prompt family (distinct families share nothing). */
const hashes = (family: number, blocks: number) => Array.from({ length: blocks }, (_, i) => family * 1000 + i);

const close = (actual: number, expected: number) => assert.ok(Math.abs(actual - expected) < 1e-9, `${actual} ≉ ${expected}`);

describe('EngineModel step time', () => {
  it('follows β0 + β1·uncached prefill tokens + β2·decode tokens', () => {
    const { clock, submit, tokenTimes } = setup();
    submit({ id: 'a', promptTokens: 100, maxTokens: 3 });
    clock.run();
    const [first, second, third] = tokenTimes.get('a')!;
    close(first, 5 + 100 * 0.02);
    close(second - first, 5 + 1 * 0.01);
    close(third - second, 5 + 1 * 0.01);
  });

  it('batches requests that arrive together into one step', () => {
    const { clock, submit, tokenTimes } = setup();
    submit({ id: 'a', promptTokens: 100, maxTokens: 2 });
    submit({ id: 'b', promptTokens: 60, maxTokens: 2 });
    clock.run();
    close(tokenTimes.get('a')![0], 5 + 160 * 0.02);
    close(tokenTimes.get('b')![0], 5 + 160 * 0.02);
    close(tokenTimes.get('a')![1], 5 + 160 * 0.02 + 5 + 2 * 0.01);
  });

  it('chunks a long prefill to the step token budget', () => {
    const { clock, submit, tokenTimes } = setup();
    submit({ id: 'long', promptTokens: 600, maxTokens: 1 });
    clock.run();
    // 256 + 256 + 88 tokens: three steps.
    close(tokenTimes.get('long')![0], 3 * 5 + 600 * 0.02);
  });

  it('makes a 64k-token prefill on the 8B profile take 3–4 s (attention is super-linear)', () => {
    const clock = new VirtualClock();
    const engine = new EngineModel(getProfile('llama-3.1-8b-h100'), clock);
    let firstToken = NaN;
    engine.submit({ id: 'x', promptTokens: 65_536, maxTokens: 1, onFirstToken: (t) => (firstToken = t) });
    clock.run();
    assert.ok(firstToken > 3000 && firstToken < 4000, `64k prefill took ${firstToken} ms`);
  });
});

describe('EngineModel on a clock whose timers fire late', () => {
  // Real time at a high speed factor: timers fire at whole milliseconds of wall
  // time, many model milliseconds late. Here: rounded up to 10 ms.
  class LateClock extends VirtualClock {
    override schedule(delayMs: number, fn: () => void) {
      const at = this.now() + Math.max(0, delayMs);
      return super.schedule(Math.ceil(at / 10) * 10 - this.now(), fn);
    }
  }

  function run(clock: VirtualClock) {
    const engine = new EngineModel(tiny, clock);
    const times = new Map<string, number[]>();
    const submit = (id: string, maxTokens: number) => {
      times.set(id, []);
      engine.submit({ id, promptTokens: 100, maxTokens, onToken: (_i, t) => times.get(id)!.push(t) });
    };
    submit('a', 40);
    // The arrival itself is on time; only the engine's timers are late.
    VirtualClock.prototype.schedule.call(clock, 23.5, () => submit('b', 5));
    clock.run();
    return times;
  }

  it('keeps the model’s step times, and starts no request before it arrived', () => {
    const exact = run(new VirtualClock());
    const late = run(new LateClock());
    assert.deepEqual(late, exact);
    assert.ok(late.get('b')![0] - 23.5 >= 5 + 100 * 0.02, 'b’s prefill began before it arrived');
  });
});

describe('EngineModel prefix cache', () => {
  it('serves a repeated prompt from the cache, recomputing only its last block', () => {
    const { clock, engine, submit, results, tokenTimes } = setup();
    submit({ id: 'first', promptTokens: 160, maxTokens: 2, blocks: blocksOfHashes(hashes(1, 10)) });
    clock.run();
    const start = clock.now();
    submit({ id: 'again', promptTokens: 160, maxTokens: 2, blocks: blocksOfHashes(hashes(1, 10)) });
    clock.run();
    assert.equal(results.get('first')!.cachedTokens, 0);
    // One token must be computed to sample from, so the last full block is not a hit.
    assert.equal(results.get('again')!.cachedTokens, 144);
    close(tokenTimes.get('again')![0] - start, 5 + 16 * 0.02);
    const m = engine.snapshot();
    assert.equal(m.prefixCacheQueries, 320);
    assert.equal(m.prefixCacheHits, 144);
  });

  it('evicts the least recently used prefix first, and a prompt’s tail before its head', () => {
    const { clock, submit, results } = setup();
    // Three 20-block prompts fill 60 of the 64 blocks, then all are freed but stay cached.
    for (const family of [1, 2, 3]) {
      submit({ id: `p${family}`, promptTokens: 320, maxTokens: 1, blocks: blocksOfHashes(hashes(family, 20)) });
      clock.run();
    }
    // A fourth takes the 4 never-used blocks and 16 of the oldest prompt's, from its tail.
    submit({ id: 'p4', promptTokens: 320, maxTokens: 1, blocks: blocksOfHashes(hashes(4, 20)) });
    clock.run();
    submit({ id: 'p1-again', promptTokens: 320, maxTokens: 1, blocks: blocksOfHashes(hashes(1, 20)) });
    clock.run();
    assert.equal(results.get('p1-again')!.cachedTokens, 4 * 16);
    submit({ id: 'p3-again', promptTokens: 320, maxTokens: 1, blocks: blocksOfHashes(hashes(3, 20)) });
    clock.run();
    assert.equal(results.get('p3-again')!.cachedTokens, 19 * 16);
  });
});

describe('EngineModel batching', () => {
  it('never runs more than max_num_seqs requests, queueing the rest in order', () => {
    const { clock, engine, submit, results, tokenTimes } = setup();
    let peakRunning = 0;
    let peakWaiting = 0;
    const observe = () => {
      peakRunning = Math.max(peakRunning, engine.runningCount);
      peakWaiting = Math.max(peakWaiting, engine.waitingCount);
    };
    for (let i = 0; i < 10; i++) submit({ id: `r${i}`, promptTokens: 40, maxTokens: 20 }, observe);
    clock.run();
    assert.equal(peakRunning, tiny.maxNumSeqs);
    assert.equal(peakWaiting, 6);
    assert.equal(results.size, 10);
    const firstTokens = [...Array(10).keys()].map((i) => tokenTimes.get(`r${i}`)![0]);
    assert.deepEqual(
      [...firstTokens].sort((a, b) => a - b),
      firstTokens,
      'admitted first come, first served',
    );
    const m = engine.snapshot();
    assert.equal(m.running + m.waiting, 0);
    assert.equal(m.finished.length, 10);
  });

  it('preempts the newest request when KV runs out during decode, and still finishes everything', () => {
    const { clock, engine, submit, results, tokenTimes } = setup();
    let peakUsage = 0;
    // Each needs 44 of the 64 blocks by its end: four at once cannot all fit.
    for (let i = 0; i < 4; i++) submit({ id: `r${i}`, promptTokens: 200, maxTokens: 500 }, () => (peakUsage = Math.max(peakUsage, engine.kvUsage)));
    clock.run();
    const m = engine.snapshot();
    assert.ok(m.preemptions > 0, 'no preemption happened');
    assert.equal(
      [...results.values()].reduce((sum, r) => sum + r.preempted, 0),
      m.preemptions,
    );
    for (let i = 0; i < 4; i++) {
      assert.equal(results.get(`r${i}`)!.outputTokens, 500);
      assert.equal(results.get(`r${i}`)!.finishReason, 'length');
      assert.equal(tokenTimes.get(`r${i}`)!.length, 500);
    }
    assert.ok(peakUsage <= 1);
    assert.equal(engine.kvUsage, 0);
    // The oldest request is never the victim while newer ones run.
    assert.equal(results.get('r0')!.preempted, 0);
  });

  it('frees a cancelled request’s KV at once and reports it aborted', () => {
    const { clock, engine, submit, results } = setup();
    submit({ id: 'long', promptTokens: 300, maxTokens: 500 });
    clock.run(100);
    assert.ok(engine.kvUsage > 0);
    assert.equal(engine.cancel('long'), true);
    assert.equal(engine.kvUsage, 0);
    assert.equal(engine.runningCount, 0);
    const result = results.get('long')!;
    assert.equal(result.finishReason, 'abort');
    assert.ok(result.outputTokens > 0 && result.outputTokens < 500);
    assert.equal(engine.cancel('long'), false);
    assert.equal(engine.cancel('never-submitted'), false);
    clock.run();
    assert.equal(engine.snapshot().finished.abort, 1);
  });

  it('cancels a waiting request without it ever running', () => {
    const { clock, engine, submit, results } = setup();
    for (let i = 0; i < 5; i++) submit({ id: `r${i}`, promptTokens: 40, maxTokens: 50 });
    clock.run(20);
    assert.equal(engine.waitingCount, 1);
    assert.equal(engine.cancel('r4'), true);
    assert.equal(engine.waitingCount, 0);
    clock.run();
    assert.ok(Number.isNaN(results.get('r4')!.firstTokenAt));
    assert.equal(results.get('r4')!.outputTokens, 0);
    assert.equal(results.get('r3')!.outputTokens, 50);
  });

  it('refuses requests longer than max_model_len and duplicate ids', () => {
    const { engine } = setup();
    assert.throws(() => engine.submit({ id: 'x', promptTokens: 1000, maxTokens: 100 }), /max_model_len/);
    engine.submit({ id: 'y', promptTokens: 10, maxTokens: 1 });
    assert.throws(() => engine.submit({ id: 'y', promptTokens: 10, maxTokens: 1 }), /already/);
  });
});

describe('EngineModel LoRA', () => {
  it('holds at most max_loras adapters, lets other requests pass a blocked one, and counts distinct adapters per batch', () => {
    const { clock, engine, submit, tokenTimes, results } = setup();
    let peakAdapters = 0;
    const observe = () => (peakAdapters = Math.max(peakAdapters, engine.snapshot().runningAdapters.length));
    submit({ id: 'a', promptTokens: 32, maxTokens: 5, adapter: 'alpha' }, observe);
    submit({ id: 'b', promptTokens: 32, maxTokens: 5, adapter: 'beta' }, observe);
    submit({ id: 'c', promptTokens: 32, maxTokens: 5, adapter: 'gamma' }, observe);
    submit({ id: 'base', promptTokens: 32, maxTokens: 5 }, observe);

    clock.run(1);
    const first = engine.snapshot();
    assert.deepEqual(first.runningAdapters, ['alpha', 'beta']);
    assert.deepEqual(first.waitingAdapters, ['gamma']);
    assert.equal(first.running, 3, 'the base-model request passed the blocked one');

    clock.run();
    // First step: 96 prefill tokens, two adapters loaded (20 ms each) and two in the batch (1 ms each).
    close(tokenTimes.get('a')![0], 5 + 96 * 0.02 + 2 * 20 + 2 * 1);
    close(tokenTimes.get('base')![0], tokenTimes.get('a')![0]);
    assert.ok(tokenTimes.get('c')![0] > tokenTimes.get('a')![4], 'gamma waited for a free slot');
    assert.equal(results.get('c')!.outputTokens, 5);
    assert.equal(peakAdapters, 2);
    const m = engine.snapshot();
    assert.equal(m.maxLoras, 2);
    assert.ok(m.loadedAdapters.includes('gamma') && m.loadedAdapters.length === 2);
    assert.ok(m.meanDistinctAdapters > 1 && m.meanDistinctAdapters <= 2, `mean ${m.meanDistinctAdapters}`);
  });

  it('starts with pre-loaded adapters at no load cost, and evicts only idle ones', () => {
    const clock = new VirtualClock();
    const engine = new EngineModel(tiny, clock, { preloadAdapters: ['alpha'] });
    assert.equal(engine.isAdapterLoaded('alpha'), true);
    let firstToken = NaN;
    engine.submit({ id: 'a', promptTokens: 32, maxTokens: 3, adapter: 'alpha', onFirstToken: (t) => (firstToken = t) });
    clock.run(1);
    assert.equal(engine.evictAdapter('alpha'), false, 'in use');
    clock.run();
    close(firstToken, 5 + 32 * 0.02 + 1);
    assert.equal(engine.evictAdapter('alpha'), true);
    assert.equal(engine.isAdapterLoaded('alpha'), false);
  });
});

describe('EngineModel fast-forward', () => {
  // Many requests on the tiny profile (KV for 4 × 256 tokens): prefix hits, chunked prefills,
  // preemptions, adapters, a cancellation, one streaming request, and observations at odd times.
  function run(fastForward: boolean, maxLoras: number, numGpuBlocks: number, maxNumSeqs: number) {
    const clock = new VirtualClock();
    let timers = 0;
    const counting = { now: () => clock.now(), schedule: (delayMs: number, fn: () => void) => (timers++, clock.schedule(delayMs, fn)) };
    const engine = new EngineModel({ ...tiny, maxLoras, numGpuBlocks, maxNumSeqs }, counting, { fastForward });
    let seed = 7;
    const random = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
    const log: string[] = [];
    let at = 0;
    for (let i = 0; i < 120; i++) {
      at += random() * 120;
      const family = Math.floor(random() * 4);
      const promptTokens = 16 + Math.floor(random() * 300);
      const maxTokens = 1 + Math.floor(random() * (i % 7 === 0 ? 400 : 60));
      const adapter = maxLoras > 0 && random() < 0.3 ? `ad${Math.floor(random() * 3)}` : undefined;
      const streaming = i === 30;
      const id = `r${i}`;
      clock.schedule(at, () =>
        engine.submit({
          id,
          promptTokens,
          maxTokens,
          adapter,
          blocks: blocksOfHashes(Array.from({ length: Math.floor(promptTokens / 16) }, (_, b) => family * 1000 + b)),
          onFirstToken: (t) => log.push(`${id} first ${t}`),
          onToken: streaming ? (index, t) => log.push(`${id} token ${index} ${t}`) : undefined,
          onFinish: (r, t) => {
            log.push(`${id} ${r.finishReason} ${t} out ${r.outputTokens} cached ${r.cachedTokens} preempted ${r.preempted}`);
            // Cancels from inside a step's completion, of requests before and after this one in the batch.
            if (i % 10 === 3) for (const k of [i - 2, i + 1, i + 2]) log.push(`cancel r${k} ${engine.cancel(`r${k}`)}`);
          },
        }),
      );
      if (i === 50) clock.schedule(at + 25, () => engine.cancel('r48'));
    }
    for (let t = 3; t < at + 20_000; t += 37.3)
      clock.schedule(t, () =>
        log.push(
          `@${clock.now().toFixed(3)} kv ${engine.kvUsage} run ${engine.runningCount} wait ${engine.waitingCount} gen ${engine.snapshot().generationTokens}`,
        ),
      );
    clock.run();
    return { log, metrics: engine.snapshot(), histogram: engine.batchSizeHistogram(), mean: engine.meanBatchSize, timers };
  }

  it('gives the per-step model’s token and finish times, KV usage, preemptions and step statistics', () => {
    // Short of KV (preemptions, a queue) with and without adapters; then with room (long windows).
    for (const [maxLoras, blocks, seqs] of [
      [0, 64, 4],
      [2, 64, 4],
      [2, 4096, 16],
    ]) {
      const stepwise = run(false, maxLoras, blocks, seqs);
      const fast = run(true, maxLoras, blocks, seqs);
      if (blocks === 64) assert.ok(stepwise.metrics.preemptions > 0, 'the workload preempts');
      assert.ok(stepwise.metrics.prefixCacheHits > 0, 'the workload hits the prefix cache');
      assert.deepEqual(fast.log, stepwise.log);
      assert.deepEqual(fast.metrics, stepwise.metrics);
      assert.deepEqual(fast.histogram, stepwise.histogram);
      assert.equal(fast.mean, stepwise.mean);
      if (blocks > 64) assert.ok(fast.timers < stepwise.timers * 0.7, `${fast.timers} timers with fast-forward, ${stepwise.timers} without`);
    }
  });
});
