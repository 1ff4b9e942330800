// Decision 3 — which replica: filters, the strategy chain, affinity with its
// release valve, and "deprioritize, don't exclude" (docs/policies.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createEnv } from '../../core/decide/env.ts';
import { chosen, ManualFleet, promptOf, rejected, route, routeAdmitted, singlePool } from '../helpers/core.ts';

test('session affinity: a conversation stays on one replica', () => {
  const policy = singlePool({ strategies: ['session-affinity', 'power-of-two'], replicas: 8 });
  const first = routeAdmitted(policy, { model: 'm', conversation: 'c-1' });
  for (let i = 0; i < 20; i++)
    assert.equal(routeAdmitted(policy, { model: 'm', conversation: 'c-1', content: `turn ${i}` }).value.replica, first.value.replica);
  assert.match(first.value.reason, /^session-affinity/);
});

// Session affinity keeps the conversation's replica while its KV usage is under the release threshold (0.85).
const releaseTable = [
  { kv: 0.5, stays: true },
  { kv: 0.84, stays: true },
  { kv: 0.85, stays: false },
  { kv: 0.93, stays: false },
];
for (const row of releaseTable) {
  test(`session affinity releases at the threshold: kv ${row.kv} ${row.stays ? 'keeps' : 'releases'} the conversation`, () => {
    const policy = singlePool({ strategies: [{ name: 'session-affinity', config: { release_threshold: 0.85 } }, 'least-load'], replicas: 4 });
    const home = routeAdmitted(policy, { model: 'm', conversation: 'popular' }).value.replica;
    const fleet = new ManualFleet();
    for (let i = 0; i < 4; i++) fleet.set(`r${i}`, { kvUsage: 0.3 + i * 0.01 });
    fleet.set(home, { kvUsage: row.kv });
    const d = routeAdmitted(policy, { model: 'm', conversation: 'popular' }, fleet);
    assert.equal(d.value.replica === home, row.stays, d.value.reason);
    if (!row.stays) assert.match(JSON.stringify(d.trace.replica), /released/);
  });
}

test("session affinity's reason says the owner's kv as it is now, scrape after scrape", () => {
  const policy = singlePool({ strategies: ['session-affinity', 'least-load'], replicas: 4 });
  const home = routeAdmitted(policy, { model: 'm', conversation: 'c-kv' }).value.replica;
  const fleet = new ManualFleet();
  for (const kv of [0.5, 0.5, 0.123, 0.7, 0.5, 0]) {
    fleet.set(home, { kvUsage: kv });
    const d = routeAdmitted(policy, { model: 'm', conversation: 'c-kv' }, fleet);
    assert.equal(d.value.replica, home);
    assert.equal(d.value.reason, `session-affinity: conversation hashes to ${home} (kv ${kv.toFixed(2)} < 0.85)`);
  }
});

test('session affinity with bounded loads walks on from a full replica', () => {
  const policy = singlePool({ strategies: [{ name: 'session-affinity', config: { bounded_load: 1.25 } }], replicas: 4 });
  const home = routeAdmitted(policy, { model: 'm', conversation: 'c-9' }).value.replica;
  const fleet = new ManualFleet();
  for (let i = 0; i < 4; i++) fleet.set(`r${i}`, { inFlight: 2 });
  fleet.set(home, { inFlight: 20 });
  const d = routeAdmitted(policy, { model: 'm', conversation: 'c-9' }, fleet);
  assert.notEqual(d.value.replica, home);
  // And it is stable: the same next replica every time.
  assert.equal(routeAdmitted(policy, { model: 'm', conversation: 'c-9' }, fleet).value.replica, d.value.replica);
});

test('property: removing one of N replicas moves about 1/N of conversations, and only its own', () => {
  fc.assert(
    fc.property(fc.integer({ min: 3, max: 12 }), fc.nat(), (n, removedIndex) => {
      const policy = singlePool({ strategies: ['session-affinity'], replicas: n });
      const removed = `r${removedIndex % n}`;
      const fleet = new ManualFleet().set(removed, { health: 'failing' });
      let moved = 0;
      const conversations = 2000;
      for (let c = 0; c < conversations; c++) {
        const before = routeAdmitted(policy, { model: 'm', conversation: `conv-${c}` }).value.replica;
        const after = routeAdmitted(policy, { model: 'm', conversation: `conv-${c}` }, fleet).value.replica;
        if (before !== after) {
          moved++;
          if (before !== removed) return false; // only the removed replica's conversations move
        }
      }
      const share = moved / conversations;
      return Math.abs(share - 1 / n) < 0.35 / n + 0.02;
    }),
    { numRuns: 12 },
  );
});

test('not ready, draining and failing replicas are excluded; unknown ones are not', () => {
  const policy = singlePool({ strategies: ['round-robin'], replicas: 4 });
  const fleet = new ManualFleet().set('r0', { health: 'not_ready' }).set('r1', { health: 'draining' }).set('r2', { health: 'failing' });
  const seen = new Set<string>();
  for (let i = 0; i < 20; i++) seen.add(routeAdmitted(policy, { model: 'm' }, fleet).value.replica);
  assert.deepEqual([...seen], ['r3']);
  const all = new ManualFleet()
    .set('r0', { health: 'not_ready' })
    .set('r1', { health: 'draining' })
    .set('r2', { health: 'failing' })
    .set('r3', { health: 'failing' });
  const d = rejected(route(policy, { model: 'm' }, all));
  assert.equal(d.rejection.status, 503);
  assert.equal(d.rejection.code, 'no_healthy_replica');
  assert.ok(d.rejection.retryAfterS! > 0);
});

test('a replica draining by policy takes no new requests', () => {
  const policy = singlePool({ strategies: ['round-robin'], replicas: 2, replicaFields: 'draining: false' });
  const draining = singlePool({ strategies: ['round-robin'], replicas: 1, replicaFields: 'draining: true' });
  assert.equal(chosen(route(draining, { model: 'm' })).status, 503);
  assert.equal(routeAdmitted(policy, { model: 'm' }).value.status, 200);
});

test("deprioritize, don't exclude: saturated replicas get traffic only when every replica is saturated", () => {
  const policy = singlePool({ strategies: ['random'], replicas: 3 });
  const fleet = new ManualFleet().set('r0', { kvUsage: 0.97 }).set('r1', { kvUsage: 0.5 }).set('r2', { kvUsage: 0.99 });
  for (let i = 0; i < 30; i++) assert.equal(routeAdmitted(policy, { model: 'm' }, fleet).value.replica, 'r1');
  const d = routeAdmitted(policy, { model: 'm' }, fleet);
  assert.match(JSON.stringify(d.trace.replica), /deprioritized: saturated/);
  // All saturated: still served (the engine may queue), not rejected.
  fleet.set('r1', { kvUsage: 0.96 });
  const seen = new Set<string>();
  for (let i = 0; i < 60; i++) {
    const all = routeAdmitted(policy, { model: 'm' }, fleet);
    assert.equal(all.value.status, 200);
    seen.add(all.value.replica);
  }
  assert.equal(seen.size, 3, 'every saturated replica still gets some traffic');
});

test("stale load signals fall back to the router's own in-flight counts", () => {
  const policy = singlePool({ strategies: ['least-load'], replicas: 2, settings: 'kind: settings\nmax_staleness_ms: 5000\n' });
  const now = 100_000;
  const env = createEnv({ now: () => now });
  // Scraped 60 s ago: r0 looked idle, but this router has 50 requests on it now.
  const fleet = new ManualFleet(() => now)
    .set('r0', { kvUsage: 0.0, running: 0, inFlight: 50, ageMs: 60_000 })
    .set('r1', { kvUsage: 0.2, running: 10, inFlight: 10, ageMs: 60_000 });
  assert.equal(routeAdmitted(policy, { model: 'm' }, fleet, env).value.replica, 'r1');
  // The same numbers, fresh: the scrape says r0 is idle... but 50 in flight beyond its running batch count as queued.
  fleet.set('r0', { kvUsage: 0.0, running: 0, inFlight: 0 }).set('r1', { kvUsage: 0.2, running: 10, inFlight: 10 });
  assert.equal(routeAdmitted(policy, { model: 'm' }, fleet, env).value.replica, 'r0');
});

test('prefix affinity: prompts sharing a long system prompt go where it was seen', () => {
  const policy = singlePool({ strategies: ['prefix-affinity', 'round-robin'], replicas: 4 });
  const system = promptOf(600);
  const first = routeAdmitted(policy, {
    model: 'm',
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: 'question one' },
    ],
  });
  for (let i = 0; i < 10; i++) {
    const d = routeAdmitted(policy, {
      model: 'm',
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: `question ${i}` },
      ],
    });
    assert.equal(d.value.replica, first.value.replica);
    assert.match(d.value.reason, /^prefix-affinity: holds \d+ of \d+ prefix blocks/);
  }
  // Unrelated prompts spread out (round-robin), they don't all follow.
  const seen = new Set<string>();
  for (let i = 0; i < 8; i++) seen.add(routeAdmitted(policy, { model: 'm', content: `${i} ${promptOf(200)}` }).value.replica);
  assert.ok(seen.size > 1);
});

test('prefix affinity releases a replica past the threshold', () => {
  const policy = singlePool({ strategies: [{ name: 'prefix-affinity', config: { release_threshold: 0.85 } }, 'least-load'], replicas: 3 });
  const prompt = promptOf(800);
  const home = routeAdmitted(policy, { model: 'm', content: prompt }).value.replica;
  const fleet = new ManualFleet().set(home, { kvUsage: 0.9 });
  const d = routeAdmitted(policy, { model: 'm', content: prompt }, fleet);
  assert.notEqual(d.value.replica, home);
  assert.match(JSON.stringify(d.trace.replica), /past the release threshold/);
});

test('LoRA affinity: loaded replicas first, then room for another adapter', () => {
  const policy = singlePool({
    strategies: ['lora-affinity', 'round-robin'],
    replicas: 4,
    replicaFields: 'max_loras: 2',
    tenants: 'kind: tenants\nanonymous: t\ntenants:\n  - { id: t, tier: free, adapters: [{ name: a1, model: m }, { name: a2, model: m }] }\n',
  });
  const fleet = new ManualFleet()
    .set('r0', { kvUsage: 0.6, loadedAdapters: ['a1', 'x'] })
    .set('r1', { kvUsage: 0.35, loadedAdapters: ['a1'] })
    .set('r2', { kvUsage: 0.1, loadedAdapters: ['x', 'y'] })
    .set('r3', { kvUsage: 0.3, loadedAdapters: [] });
  assert.equal(routeAdmitted(policy, { model: 'a1' }, fleet).value.replica, 'r1', 'least loaded of those holding a1');
  // a2 is loaded nowhere: r2 is least loaded but full (2 of 2 adapters); r3 has room.
  assert.equal(routeAdmitted(policy, { model: 'a2' }, fleet).value.replica, 'r3');
  // The router remembers where it just sent a2, before any scrape shows it.
  assert.equal(routeAdmitted(policy, { model: 'a2' }, fleet).value.replica, 'r3');
  // No adapter: lora-affinity passes, round-robin decides.
  assert.match(routeAdmitted(policy, { model: 'm' }, fleet).value.reason, /^round-robin/);
});

test('power of two: the lower load score of two sampled replicas, deterministic under a seed', () => {
  const picks = (seed: number) => {
    const policy = singlePool({ strategies: ['power-of-two'], replicas: 6, seed });
    const fleet = new ManualFleet();
    for (let i = 0; i < 6; i++) fleet.set(`r${i}`, { kvUsage: i / 10 });
    return Array.from({ length: 50 }, () => routeAdmitted(policy, { model: 'm' }, fleet).value.replica);
  };
  assert.deepEqual(picks(5), picks(5));
  const counts = new Map<string, number>();
  for (const r of picks(5)) counts.set(r!, (counts.get(r!) ?? 0) + 1);
  // r5 is the busiest: it can only win when sampled with itself, which never happens.
  assert.equal(counts.get('r5') ?? 0, 0);
  assert.ok((counts.get('r0') ?? 0) > (counts.get('r4') ?? 0));
});

test('baselines: least-load, round-robin and random', () => {
  const fleet = new ManualFleet().set('r0', { kvUsage: 0.5 }).set('r1', { kvUsage: 0.1 }).set('r2', { kvUsage: 0.3 });
  assert.equal(routeAdmitted(singlePool({ strategies: ['least-load'], replicas: 3 }), { model: 'm' }, fleet).value.replica, 'r1');
  const rr = singlePool({ strategies: ['round-robin'], replicas: 3 });
  assert.deepEqual(
    Array.from({ length: 6 }, () => routeAdmitted(rr, { model: 'm' }).value.replica),
    ['r0', 'r1', 'r2', 'r0', 'r1', 'r2'],
  );
  const random = singlePool({ strategies: ['random'], replicas: 3 });
  const seen = new Set(Array.from({ length: 60 }, () => routeAdmitted(random, { model: 'm' }).value.replica));
  assert.equal(seen.size, 3);
});

test('every strategy passing ends in least load; the trace says who passed and why', () => {
  const policy = singlePool({ strategies: ['session-affinity', 'lora-affinity'], replicas: 3 });
  const fleet = new ManualFleet().set('r0', { kvUsage: 0.5 }).set('r1', { kvUsage: 0.4 }).set('r2', { kvUsage: 0.1 });
  const d = routeAdmitted(policy, { model: 'm' }, fleet);
  assert.equal(d.value.replica, 'r2');
  assert.match(d.value.reason, /^least-load \(fallback\)/);
  const notes = (d.trace.replica?.alternatives ?? []).map((a) => `${a.name}: ${a.note ?? a.score}`);
  assert.ok(notes.includes('session-affinity: passed: no conversation id'));
  assert.ok(notes.includes('lora-affinity: passed: no adapter'));
});

test('a retry excludes the replica that failed', () => {
  const policy = singlePool({ strategies: ['session-affinity'], replicas: 3 });
  const first = routeAdmitted(policy, { model: 'm', conversation: 'c' });
  const retry = routeAdmitted(policy, { model: 'm', conversation: 'c' }, new ManualFleet(), createEnv({ now: () => 0 }), {
    excludeReplicas: new Set([first.value.replica]),
  });
  assert.equal(retry.value.status, 200);
  assert.notEqual(retry.value.replica, first.value.replica);
});

test('strategies see pre-hashed blocks given as a list or as a function alike, and never the prompt itself', () => {
  const policy = singlePool({ strategies: ['prefix-affinity', 'power-of-two'], replicas: 4 });
  const blocks = Array.from({ length: 40 }, (_, i) => i * 7919);
  let expansions = 0;
  const asList = routeAdmitted(policy, { model: 'm', content: 'secret prompt text' }, undefined, undefined, { blockHashes: blocks });
  const asFunction = routeAdmitted(policy, { model: 'm', content: 'secret prompt text' }, undefined, undefined, {
    blockHashes: () => {
      expansions++;
      return blocks;
    },
  });
  assert.ok(asList.handles.routed.prefixHashes.length > 0);
  assert.deepEqual(asFunction.handles.routed.prefixHashes, asList.handles.routed.prefixHashes);
  assert.equal(expansions, 1, 'expanded once, when prefix-affinity asked, and kept');
  // The routed request a strategy gets carries its fields and the hashes, not the prompt.
  assert.doesNotMatch(JSON.stringify(asList.handles.routed), /secret/);
  assert.ok(!Object.values(asList.handles.routed).some((v) => typeof v === 'object' && v !== null && 'promptText' in v));
});
