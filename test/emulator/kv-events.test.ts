// The engine's KV events against its cache: replaying every BlockStored and
// BlockRemoved into a set must give exactly the blocks the cache holds, under
// random workloads of shared prefixes, multi-turn growth, preemption and
// cancellation. And the cache holds answers: a conversation's next turn hits
// the blocks of the answer it repeats.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { seededRandom, chainBlockHashes } from '../../sdk/index.ts';
import { EngineModel } from '../../sim/engine/engine-model.ts';
import { KvEventRecorder, type KvBlockEvent } from '../../sim/engine/kv-events.ts';
import { PROFILES } from '../../sim/engine/profiles.ts';
import { blockCount, type PromptBlocks } from '../../sim/engine/prompt-blocks.ts';
import type { EngineResult } from '../../sim/engine/types.ts';
import { ASSISTANT_HEADER, estimateTokens, renderChat, sequenceBlocks } from '../../sim/emulator/prompt.ts';
import { fillerText } from '../../sim/emulator/filler.ts';
import { VllmBlockHasher } from '../../sim/emulator/vllm-block-hash.ts';

const hasher = new VllmBlockHasher('kv-events-test');
import { addRun, emptyRuns, engineBlocks, rawBlockIds } from '../../sim/workload/block-runs.ts';
import { VirtualClock } from './virtual-clock.ts';

const key = (stream: number, block: number) => `${stream >>> 0}:${block}`;

/** The name every (stream, block) of the prompts seen should get: a hash is a function of the prefix, so one name each. */
function recordNames(names: Map<string, unknown>, prompt: PromptBlocks): void {
  let r = 0;
  for (let j = 0; j < blockCount(prompt); j++) {
    while (prompt.ends[r] <= j) r++;
    const k = key(prompt.streams[r], j);
    const name = prompt.hashes![j];
    assert.equal(names.get(k) ?? name, name, 'a stream block must have one hash');
    names.set(k, name);
  }
}

function randomWorkload(seed: string, fastForward: boolean, style: 'runs' | 'blocks') {
  const random = seededRandom(seed);
  const clock = new VirtualClock();
  const engine = new EngineModel({ ...PROFILES.tiny, numGpuBlocks: 48, maxNumSeqs: 4, maxModelLen: 512 }, clock, { fastForward });
  const live = new Set<number>();
  let events = 0;
  const recorder = new KvEventRecorder((event: KvBlockEvent) => {
    events++;
    if (event.type === 'stored') {
      assert.equal(event.tokenIds.length, style === 'blocks' ? event.hashes.length * 16 : 0);
      for (const h of event.hashes) {
        assert.ok(!live.has(h), `block ${h} stored twice without a removal`);
        live.add(h);
      }
    } else if (event.type === 'removed') {
      for (const h of event.hashes) assert.ok(live.delete(h), `block ${h} removed but not stored`);
    }
  });
  engine.setKvListener(recorder);
  const names = new Map<string, number>();
  const results: EngineResult[] = [];
  let n = 0;
  const submitOne = () => {
    const family = Math.floor(random() * 4);
    const system = 2 + family;
    const own = Math.floor(random() * 6);
    const promptTokens = (system + own) * 16 + Math.floor(random() * 16) + 1;
    const maxTokens = 1 + Math.floor(random() * 40);
    let blocks: PromptBlocks;
    if (style === 'runs') {
      // The simulator's shape: a shared run, then the request's own (prompt and answer).
      const conversation = Math.floor(random() * 6);
      const runs = emptyRuns();
      addRun(runs, 1000 + family, 0, system);
      addRun(runs, 2000 + conversation * 10 + family, system, Math.floor((promptTokens + maxTokens) / 16));
      blocks = { ...engineBlocks(runs, 'm'), hashes: chainBlockHashes(rawBlockIds(runs), 'm') };
    } else {
      // The emulator's: a block per run, text hashed as the router hashes it.
      const text = `system prompt ${family} `.repeat(system * 4) + `user ${Math.floor(random() * 3)} `.repeat(own * 8 + 1);
      blocks = sequenceBlocks(text, maxTokens, hasher, undefined, true);
    }
    recordNames(names, blocks);
    const id = `r${n++}`;
    engine.submit({ id, promptTokens, maxTokens, blocks, onFinish: (result) => results.push(result) });
    if (random() < 0.1) clock.schedule(random() * 30, () => engine.cancel(id));
  };
  for (let i = 0; i < 120; i++) clock.schedule(i * 7 * random(), submitOne);
  // Compare at many points of the run, not only at the end.
  let checks = 0;
  const check = () => {
    const cached = new Set(engine.cachedBlockIds().map(([stream, block]) => names.get(key(stream, block))));
    assert.ok(!cached.has(undefined), 'a cached block has no name');
    assert.deepEqual([...live].sort(), [...cached].sort());
    assert.equal(recorder.size, live.size);
    checks++;
  };
  for (let t = 5; t < 3000; t += 37) clock.schedule(t, check);
  clock.run();
  check();
  return { events, checks, results, engine };
}

describe('KV events', () => {
  for (const style of ['runs', 'blocks'] as const) {
    for (const fastForward of [false, true]) {
      it(`replayed, equal the cache's contents (${style}, fast-forward ${fastForward})`, () => {
        for (const seed of ['a', 'b', 'c']) {
          const { events, checks, results, engine } = randomWorkload(`${seed}:${style}`, fastForward, style);
          assert.equal(results.length, 120);
          assert.ok(events > 50, `only ${events} events`);
          assert.ok(checks > 50);
          // The workload must have evicted and preempted for the test to mean something.
          assert.ok(engine.snapshot().prefixCacheHits > 0);
        }
      });
    }
  }

  it('a follow-up turn hits the blocks of the answer it repeats', () => {
    const clock = new VirtualClock();
    const engine = new EngineModel({ ...PROFILES.tiny, numGpuBlocks: 256 }, clock);
    const messages = [
      { role: 'system', content: 'You are terse. '.repeat(20) },
      { role: 'user', content: 'Tell me about prefix caches, please.' },
    ];
    const first = renderChat(messages);
    const maxTokens = 120;
    engine.submit({ id: 't1', promptTokens: estimateTokens(first), maxTokens, blocks: sequenceBlocks(first, maxTokens, hasher, undefined, true) });
    clock.run();
    const second = renderChat([...messages, { role: 'assistant', content: fillerText(maxTokens) }, { role: 'user', content: 'And then?' }]);
    assert.ok(second.startsWith(first + ASSISTANT_HEADER + fillerText(maxTokens)));
    let cached = 0;
    engine.submit({
      id: 't2',
      promptTokens: estimateTokens(second),
      maxTokens: 4,
      blocks: sequenceBlocks(second, 4, hasher, undefined, true),
      onFinish: (result) => (cached = result.cachedTokens),
    });
    clock.run();
    // Past the first prompt: into the answer, up to its last full block.
    const firstTokens = estimateTokens(first);
    assert.ok(cached > firstTokens + 64, `cached ${cached} of ${estimateTokens(second)}; the first prompt had ${firstTokens}`);
  });
});
