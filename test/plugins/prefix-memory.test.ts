// prefix-affinity keeps its memory in typed arrays (plugins/block-memory.ts)
// with an exact LRU order. Its answers must be those of the Map-based memory
// it replaced (test/plugins/prefix-affinity-map.ts): the same replica, reason
// and alternatives for every pick, through evictions, more holders than a
// block keeps, repeated blocks and state handed over on a reload.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import prefixAffinity from '../../plugins/prefix-affinity.ts';
import { BlockMemory, MAX_HOLDERS } from '../../plugins/block-memory.ts';
import { candidate, context, request } from '../../sdk/testkit/index.ts';
import type { Candidate, StrategyInstance } from '../../sdk/types.ts';
import mapPrefixAffinity from './prefix-affinity-map.ts';

const REPLICAS = Array.from({ length: MAX_HOLDERS + 4 }, (_, i) => `r${i}`);

/** A prompt's chained hashes: a shared root (a system prompt), then its own branch; few enough values to repeat. */
const prompt = fc.record({
  root: fc.integer({ min: 0, max: 2 }),
  shared: fc.integer({ min: 0, max: 6 }),
  branch: fc.integer({ min: 0, max: 30 }),
  own: fc.integer({ min: 0, max: 8 }),
  repeat: fc.boolean(),
});
const step = fc.record({
  prompt,
  candidates: fc.uniqueArray(fc.integer({ min: 0, max: REPLICAS.length - 1 }), { minLength: 1, maxLength: 8 }),
  kv: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 8, maxLength: 8 }),
  routedTo: fc.integer({ min: 0, max: REPLICAS.length - 1 }),
  reload: fc.integer({ min: 0, max: 40 }),
  /** 0: the last frozen list again, its signals changed in place (the router's kept list); 1: a new frozen list; 2: a list not frozen. */
  list: fc.integer({ min: 0, max: 2 }),
});
const config = fc.record({
  release_threshold: fc.constantFrom(0.5, 0.85, 1),
  token_release_threshold: fc.constantFrom(null, 0.5),
  max_entries: fc.integer({ min: 1, max: 60 }),
  min_match_blocks: fc.integer({ min: 1, max: 3 }),
});

function hashesOf(p: { root: number; shared: number; branch: number; own: number; repeat: boolean }): number[] {
  const hashes: number[] = [];
  for (let i = 0; i < p.shared; i++) hashes.push((p.root * 1_000_003 + i * 7919) | 0);
  for (let i = 0; i < p.own; i++) hashes.push(Math.imul(p.branch + 1, 0x9e3779b1) ^ (i * 104_729));
  // A block seen twice in one prompt (hashes of a trace can repeat).
  if (p.repeat && hashes.length > 0) hashes.push(hashes[0]);
  return hashes;
}

test('prefix-affinity answers every pick as the Map-based memory did (evictions, holder caps, reloads, kept lists)', () => {
  fc.assert(
    fc.property(config, fc.array(step, { minLength: 1, maxLength: 200 }), (cfg, steps) => {
      let current: StrategyInstance = prefixAffinity.create(cfg, context({ seed: 7 }));
      let reference: StrategyInstance = mapPrefixAffinity.create(cfg, context({ seed: 7 }));
      let kept: readonly Candidate[] | undefined;
      for (const s of steps) {
        let candidates: readonly Candidate[];
        if (s.list === 0 && kept !== undefined) {
          kept.forEach((c, i) => Object.assign(c.signals, { kvUsage: s.kv[i], tokenLoad: s.kv[7 - i] }));
          candidates = kept;
        } else {
          const made = s.candidates.map((r, i) => candidate({ id: REPLICAS[r], kvUsage: s.kv[i], signals: { tokenLoad: s.kv[7 - i] } }));
          candidates = s.list === 2 ? made : (kept = Object.freeze(made));
        }
        const routed = request({ prefixHashes: hashesOf(s.prompt) });
        assert.deepEqual(current.pick(routed, candidates), reference.pick(routed, candidates));
        current.onRouted!(routed, REPLICAS[s.routedTo]);
        reference.onRouted!(routed, REPLICAS[s.routedTo]);
        if (s.reload === 0) {
          // A policy reload: the successor carries the memory on.
          current = prefixAffinity.create(cfg, context({ seed: 8, previousState: current.exportState!() }));
          reference = mapPrefixAffinity.create(cfg, context({ seed: 8, previousState: reference.exportState!() }));
        }
      }
    }),
    { numRuns: 300 },
  );
});

test('the block memory finds what it holds, in LRU order, after growing, evicting and reusing entries', () => {
  const memory = new BlockMemory(0x5eed);
  const model = new Map<number, number[]>();
  const order: number[] = [];
  const random = (() => {
    let x = 12345;
    return () => (x = (Math.imul(x, 1_103_515_245) + 12345) >>> 0) / 2 ** 32;
  })();
  // Prompts: runs of keys touched in the same order again (whose guesses hit and which move to
  // the tail as one run), with a key left out, changed or repeated; single keys close together
  // and far apart, so that probe sequences collide and wrap.
  const prompts: number[][] = [];
  for (let round = 0; round < 6000; round++) {
    if (random() < 0.6) {
      const base = Math.floor(random() * 40) * 1000;
      const length = 1 + Math.floor(random() * 12);
      const keys: number[] = [];
      for (let j = 0; j < length; j++) {
        const r = random();
        if (r < 0.05) continue;
        keys.push(base + (r < 0.12 ? 500 + j : j));
        if (r > 0.97) keys.push(base + Math.floor(random() * length));
      }
      prompts.push(keys);
    } else {
      prompts.push([random() < 0.5 ? Math.floor(random() * 300) : Math.floor(random() * 2 ** 32) | 0]);
    }
  }
  let evictions = 0;
  for (const keys of prompts) {
    const replica = Math.floor(random() * 20);
    memory.touchAll(keys, replica);
    for (const key of keys) {
      const holders = (model.get(key) ?? []).filter((r) => r !== replica);
      holders.push(replica);
      if (holders.length > MAX_HOLDERS) holders.shift();
      model.set(key, holders);
      const at = order.indexOf(key);
      if (at >= 0) order.splice(at, 1);
      order.push(key);
    }
    if (model.size > 600) {
      memory.evictOldest(model.size - 450);
      for (const old of order.splice(0, model.size - 450)) {
        model.delete(old);
        assert.equal(memory.find(old), -1, `block ${old} is dropped, as least recently used`);
      }
      evictions++;
    }
  }
  assert.ok(evictions > 5, `${evictions} evictions`);
  assert.equal(memory.size, model.size);
  for (const [key, holders] of model) {
    const entry = memory.find(key);
    assert.ok(entry >= 0, `block ${key} is held`);
    assert.equal(memory.holderCount(entry), holders.length);
    assert.deepEqual(memory.holdersOf(entry), holders);
  }
  for (const key of [-1, 301, 2 ** 31 - 1]) if (!model.has(key)) assert.equal(memory.find(key), -1);
});

test('the block memory keeps every block and its holders while it grows', () => {
  const memory = new BlockMemory(-7);
  const keys = Array.from({ length: 9000 }, (_, i) => Math.imul(i + 1, 0x01000193) | 0);
  // Each first touch of a key may be the one that doubles the arrays.
  memory.touchAll(keys, 3);
  memory.touchAll(keys, 5);
  assert.equal(memory.size, keys.length);
  for (const key of keys) {
    const entry = memory.find(key);
    assert.deepEqual(memory.holdersOf(entry), [3, 5], `block ${key}`);
  }
  memory.evictOldest(keys.length - 10);
  assert.deepEqual(
    keys.filter((key) => memory.find(key) >= 0),
    keys.slice(-10),
    'the 10 touched last are kept',
  );
});
