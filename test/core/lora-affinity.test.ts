// lora-affinity finds the replicas holding an adapter without walking the
// pool (the router's kept lists carry an adapter index) nor looking each
// candidate up in its memory of sends: over random pools, loaded adapters and
// sends, its picks equal those of the plain walk it replaced (written out
// below as the specification), on shared frozen lists and on copies.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import loraAffinity from '../../plugins/lora-affinity.ts';
import { leastLoaded, seededRandom, type Candidate, type LoadScoreWeights, type PickResult } from '../../sdk/index.ts';
import { candidate, context, request } from '../../sdk/testkit/index.ts';
import { adaptersChanged, keepAdapterIndex } from '../../sdk/candidates.ts';

/** The pick as the strategy first made it: every candidate checked against the adapter lists and the map of sends. */
function walkedPick(candidates: readonly Candidate[], adapter: string, sent: Map<string, number>, since: number, weights: LoadScoreWeights): PickResult {
  const loaded = candidates.filter((c) => c.signals.loadedAdapters.includes(adapter) || (sent.get(c.id) ?? -Infinity) >= since);
  if (loaded.length) {
    const { best, scores } = leastLoaded(loaded, weights);
    return { replica: best!.id, reason: `${adapter} loaded on ${loaded.length} replica(s); least loaded`, alternatives: scores };
  }
  const room = candidates.filter((c) => c.signals.loadedAdapters.length < c.capacity.maxLoras);
  const { best, scores } = leastLoaded(room.length ? room : candidates, weights);
  if (!best) return { pass: true, reason: 'no candidates' };
  return {
    replica: best.id,
    reason: room.length ? `${adapter} not loaded; least loaded with room for an adapter` : `${adapter} not loaded and no replica has room; least loaded`,
    alternatives: scores,
  };
}

test('over random pools, adapters and sends, picks equal the candidate-by-candidate walk (frozen lists and copies)', () => {
  const random = seededRandom(11);
  const adapters = ['a1', 'a2', 'a3', 'a4'];
  let compared = 0;
  for (let round = 0; round < 60; round++) {
    const ctx = context({ seed: round });
    const instance = loraAffinity.create({ memory_ms: 1000 }, ctx);
    const size = 1 + Math.floor(random() * (round % 3 === 0 ? 600 : 12));
    const pool = Array.from({ length: size }, (_, i) =>
      candidate({
        id: `r${i}`,
        kvUsage: Math.floor(random() * 4) / 4, // ties, so the order of the candidates decides
        queueDepth: Math.floor(random() * 3),
        loadedAdapters: adapters.filter(() => random() < 0.08),
        capacity: { maxLoras: 1 + Math.floor(random() * 2) },
      }),
    );
    const sent = new Map<string, Map<string, number>>();
    const shared = Object.freeze([...pool]);
    keepAdapterIndex(shared);
    for (let step = 0; step < 40; step++) {
      ctx.advance(Math.floor(random() * 400));
      const adapter = adapters[Math.floor(random() * adapters.length)];
      // Some picks see a list kept as the router keeps its own (an adapter index, told of changes), some a frozen list, some a filtered copy in another order.
      if (random() < 0.3) {
        // A scrape changes a replica's adapters in place; the router says so for the list it keeps.
        const changed = pool[Math.floor(random() * pool.length)];
        (changed.signals as { loadedAdapters: readonly string[] }).loadedAdapters = adapters.filter(() => random() < 0.3);
        adaptersChanged(shared);
      }
      const choice = random();
      const list = choice < 0.4 ? shared : choice < 0.7 ? Object.freeze(pool.filter(() => random() < 0.9)) : pool.filter(() => random() < 0.9).reverse();
      const got = instance.pick(request({ adapter }), list);
      const want = walkedPick(list, adapter, sent.get(adapter) ?? new Map(), ctx.now() - 1000, ctx.loadScoreWeights);
      assert.deepEqual(got, want, `round ${round} step ${step}`);
      compared++;
      const replica = (got as { replica?: unknown } | null | undefined)?.replica;
      if (typeof replica === 'string') {
        instance.onRouted?.(request({ adapter }), replica);
        if (!sent.has(adapter)) sent.set(adapter, new Map());
        sent.get(adapter)!.set(replica, ctx.now());
      }
      // A replica this router never sent to may be remembered too (another pool's list of the same strategy instance).
      if (random() < 0.1) {
        instance.onRouted?.(request({ adapter }), `elsewhere-${step}`);
        if (!sent.has(adapter)) sent.set(adapter, new Map());
        sent.get(adapter)!.set(`elsewhere-${step}`, ctx.now());
      }
    }
  }
  assert.equal(compared, 60 * 40);
});
