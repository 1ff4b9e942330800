// The pool's kept candidates (looked at again only where the fleet changed)
// must always equal the candidates built afresh from the whole fleet: same
// replicas in the same order, same signals and ages, same exclusions, same
// panic. Checked over random fleet histories, with and without a change feed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { adapterPositions } from '../../sdk/candidates.ts';
import fc from 'fast-check';
import { buildCandidates, type CandidateSet } from '../../core/decide/candidates.ts';
import { ChangeLog } from '../../core/fleet/change-log.ts';
import { LiveFleet } from '../../core/fleet/live-fleet.ts';
import type { FleetView, ReplicaHealth, ReplicaState } from '../../core/fleet/types.ts';
import { singlePool } from '../helpers/core.ts';

const MAX_STALENESS_MS = 5000;

/** A fleet as LiveFleet keeps one: a new frozen state per change, each change in the feed. */
class FeedFleet implements FleetView {
  readonly states = new Map<string, ReplicaState>();
  constructor(readonly changes: ChangeLog) {}
  replica(id: string) {
    return this.states.get(id);
  }
  set(id: string, state: ReplicaState | undefined) {
    if (state) this.states.set(id, Object.freeze({ ...state }));
    else this.states.delete(id);
    this.changes.record(id);
  }
}

/** A fleet as the simulator keeps one: states changed in place, no feed. */
class InPlaceFleet implements FleetView {
  readonly states = new Map<string, ReplicaState & Record<string, unknown>>();
  replica(id: string) {
    return this.states.get(id);
  }
  set(id: string, state: ReplicaState | undefined) {
    if (!state) return void this.states.delete(id);
    const kept = this.states.get(id);
    if (!kept) return void this.states.set(id, { ...state });
    for (const key of Object.keys(kept)) delete kept[key];
    Object.assign(kept, state);
  }
}

function view(set: CandidateSet) {
  return {
    candidates: set.candidates.map((c) => ({
      id: c.id,
      saturated: c.saturated,
      signals: {
        kvUsage: c.signals.kvUsage,
        queueDepth: c.signals.queueDepth,
        running: c.signals.running,
        inFlight: c.signals.inFlight,
        prefillTokens: c.signals.prefillTokens,
        activeStreams: c.signals.activeStreams,
        tokenLoad: c.signals.tokenLoad,
        loadedAdapters: [...c.signals.loadedAdapters],
        ageMs: c.signals.ageMs,
        stale: c.signals.stale,
      },
    })),
    excluded: set.excluded.map((e) => ({ ...e })),
    saturated: set.saturated,
  };
}

const HEALTH: ReplicaHealth[] = ['ready', 'ready', 'ready', 'unknown', 'ejected', 'ejected', 'failing', 'not_ready', 'draining'];
const stateArb = fc.option(
  fc.record({
    health: fc.constantFrom(...HEALTH),
    inFlight: fc.nat(40),
    kvUsage: fc.option(fc.constantFrom(0, 0.3, 0.96, 1), { nil: undefined }),
    queueDepth: fc.option(fc.nat(40), { nil: undefined }),
    running: fc.option(fc.nat(40), { nil: undefined }),
    age: fc.option(fc.constantFrom(0, 100, 4999, 5001, 60_000), { nil: undefined }),
    loadedAdapters: fc.option(fc.constantFrom([], ['a'], ['a', 'b'], ['b'], ['c', 'b']), { nil: undefined }),
    prefillTokens: fc.option(fc.constantFrom(0, 1000, 70_000), { nil: undefined }),
    activeStreams: fc.option(fc.nat(4), { nil: undefined }),
    // Not a candidate's signal: changing it alone must not matter either way.
    prefixCacheHitRatio: fc.option(fc.constantFrom(0, 0.5), { nil: undefined }),
  }),
  { nil: undefined, freq: 8 },
);
const stepArb = fc.oneof(
  fc.record({ kind: fc.constant('set' as const), replica: fc.nat(11), state: stateArb }),
  fc.record({ kind: fc.constant('inflight' as const), replica: fc.nat(11), by: fc.constantFrom(-1, 1) }),
  // One signal alone moves (the router's own token counts do so between scrapes).
  fc.record({
    kind: fc.constant('one' as const),
    replica: fc.nat(11),
    field: fc.constantFrom('prefillTokens', 'activeStreams', 'kvUsage', 'queueDepth', 'running'),
    value: fc.nat(70_000),
  }),
  fc.record({ kind: fc.constant('time' as const), ms: fc.constantFrom(1, 500, 3000, 6000) }),
);

function check(makeFleet: () => FeedFleet | InPlaceFleet, runs: number) {
  fc.assert(
    fc.property(fc.array(stepArb, { maxLength: 60 }), (steps) => {
      // A fresh snapshot per run: its pool keeps its own candidates.
      const pool = singlePool({ strategies: ['power-of-two'], replicas: 12, replicaFields: 'adapters: [a]' }).pools[0];
      const fleet = makeFleet();
      let now = 100_000;
      for (let i = 0; i < 12; i++) fleet.set(`r${i}`, { health: 'ready', inFlight: 0, kvUsage: 0.1, running: 1, queueDepth: 0, scrapedAt: now });
      for (const step of steps) {
        if (step.kind === 'time') now += step.ms;
        else if (step.kind === 'inflight') {
          const state = fleet.replica(`r${step.replica}`);
          if (state) fleet.set(`r${step.replica}`, { ...state, inFlight: Math.max(0, state.inFlight + step.by) });
        } else if (step.kind === 'one') {
          const state = fleet.replica(`r${step.replica}`);
          const value = step.field === 'kvUsage' ? (step.value % 100) / 100 : step.field === 'prefillTokens' ? step.value : step.value % 50;
          if (state) fleet.set(`r${step.replica}`, { ...state, [step.field]: value });
        } else if (step.state === undefined) fleet.set(`r${step.replica}`, undefined);
        else {
          const { age, ...rest } = step.state;
          const state: Record<string, unknown> = { ...rest, scrapedAt: age === undefined ? undefined : now - age };
          for (const key of Object.keys(state)) if (state[key] === undefined) delete state[key];
          fleet.set(`r${step.replica}`, state as unknown as ReplicaState);
        }
        const kept = buildCandidates(pool, fleet, now, MAX_STALENESS_MS);
        // A retry's exclusion set that names no replica of the pool builds afresh, changing nothing else.
        const fresh = buildCandidates(pool, fleet, now, MAX_STALENESS_MS, new Set(['not-in-this-pool']));
        assert.deepEqual(view(kept), view(fresh));
        assert.ok(Object.isFrozen(kept.candidates), 'the kept list is frozen: strategies share it');
        // With replicas saturated, the kept list without them is the fresh list filtered, frozen for strategies to key by.
        if (kept.saturated > 0) {
          assert.deepEqual(
            kept.unsaturated?.map((c) => c.id),
            fresh.candidates.filter((c) => !c.saturated).map((c) => c.id),
          );
          assert.ok(Object.isFrozen(kept.unsaturated));
          for (const adapter of ['a', 'b', 'c']) {
            const walked = fresh.candidates.filter((c) => !c.saturated).flatMap((c, i) => (c.signals.loadedAdapters.includes(adapter) ? [i] : []));
            assert.deepEqual([...adapterPositions(kept.unsaturated!, adapter)], walked, `unsaturated replicas holding ${adapter}`);
          }
        } else assert.equal(kept.unsaturated, undefined);
        // The adapter index kept with the list follows adapters changed in place.
        for (const adapter of ['a', 'b', 'c']) {
          const walked = fresh.candidates.flatMap((c, i) => (c.signals.loadedAdapters.includes(adapter) ? [i] : []));
          assert.deepEqual([...adapterPositions(kept.candidates, adapter)], walked, `replicas holding ${adapter}`);
        }
      }
    }),
    { numRuns: runs, seed: 11 },
  );
}

test('kept candidates equal a fresh build, with a change feed', () => check(() => new FeedFleet(new ChangeLog()), 400));
test('kept candidates equal a fresh build when the feed overflows between decisions', () => check(() => new FeedFleet(new ChangeLog(3)), 200));
test('kept candidates equal a fresh build for a fleet changed in place, without a feed', () => check(() => new InPlaceFleet(), 200));

test('the candidate list stays the same array while only load moves, and is remade when a replica leaves', () => {
  const pool = singlePool({ strategies: ['power-of-two'], replicas: 4 }).pools[0];
  const fleet = new FeedFleet(new ChangeLog());
  for (let i = 0; i < 4; i++) fleet.set(`r${i}`, { health: 'ready', inFlight: 0, kvUsage: 0.1, scrapedAt: 0 });
  const first = buildCandidates(pool, fleet, 10, MAX_STALENESS_MS);
  fleet.set('r1', { health: 'ready', inFlight: 3, kvUsage: 0.99, scrapedAt: 5 });
  const second = buildCandidates(pool, fleet, 20, MAX_STALENESS_MS);
  assert.equal(second.candidates, first.candidates);
  assert.equal(second.candidates[1].signals.inFlight, 3);
  assert.equal(second.saturated, 1);
  fleet.set('r2', { health: 'failing', inFlight: 0, scrapedAt: 5 });
  const third = buildCandidates(pool, fleet, 30, MAX_STALENESS_MS);
  assert.notEqual(third.candidates, first.candidates);
  assert.deepEqual(
    third.candidates.map((c) => c.id),
    ['r0', 'r1', 'r3'],
  );
  assert.deepEqual(third.excluded, [{ name: 'r2', note: 'failing' }]);
});

test('a change log names what changed since a count, and says when it no longer can', () => {
  const log = new ChangeLog(4);
  const start = log.count;
  for (const id of ['a', 'b', 'a']) log.record(id);
  assert.deepEqual(log.since(start), ['a', 'b', 'a']);
  assert.deepEqual(log.since(log.count), []);
  for (const id of ['c', 'd']) log.record(id);
  assert.equal(log.since(start), undefined, 'five changes do not fit a ring of four');
  assert.deepEqual(log.since(log.count - 4), ['b', 'a', 'c', 'd']);
});

test("with the router's live fleet, a request in flight moves a candidate's load without remaking the list", async () => {
  const pool = singlePool({ strategies: ['power-of-two'], replicas: 3 }).pools[0];
  const live = new LiveFleet({ replicas: pool.replicas.map((r) => ({ id: r.id, url: r.url, engine: r.engine })) });
  try {
    const first = buildCandidates(pool, live, 0, MAX_STALENESS_MS);
    const end = live.acquire('r1');
    const second = buildCandidates(pool, live, 1, MAX_STALENESS_MS);
    assert.equal(second.candidates, first.candidates, 'the same shared list');
    assert.equal(second.candidates[1].signals.inFlight, 1, 'r1 was looked at again: the feed named it');
    end();
    live.setDraining('r2', true);
    const third = buildCandidates(pool, live, 2, MAX_STALENESS_MS);
    assert.deepEqual(
      third.candidates.map((c) => [c.id, c.signals.inFlight]),
      [
        ['r0', 0],
        ['r1', 0],
      ],
    );
    assert.deepEqual(third.excluded, [{ name: 'r2', note: 'draining' }]);
  } finally {
    await live.stop();
  }
});
