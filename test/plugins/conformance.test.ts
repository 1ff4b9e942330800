// Every built-in strategy passes the same conformance suite a third-party
// plugin is held to (sdk/testkit).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';
import prefixAffinity from '../../plugins/prefix-affinity.ts';
import { assertConformance, candidate, context, fleet, request, runConformance } from '../../sdk/testkit/index.ts';
import { formatPair } from '../../sdk/index.ts';
import type { StrategyDefinition } from '../../sdk/types.ts';

for (const definition of BUILTIN_STRATEGIES) {
  test(`built-in ${definition.name} conforms`, () => {
    assertConformance(definition);
  });
}

const base = { version: '1.0.0', sdk: '^1' } as const;

test('a strategy that picks a replica it was not given fails given-candidates-only', () => {
  const sticky: StrategyDefinition = {
    ...base,
    name: 'sticky-forever',
    create() {
      let favourite: string | undefined;
      return {
        pick(_request, candidates) {
          favourite ??= candidates[0]?.id;
          return favourite ? { replica: favourite, reason: 'always the first one seen' } : { pass: true, reason: 'none' };
        },
      };
    },
  };
  const checks = new Set(runConformance(sticky).map((f) => f.check));
  assert.ok(checks.has('given-candidates-only'), [...checks].join(', '));
});

test('a strategy that throws on an empty fleet, uses Math.random, or double-frees fails those checks', () => {
  const careless: StrategyDefinition = {
    ...base,
    name: 'careless',
    create() {
      let disposed = false;
      return {
        pick(_request, candidates) {
          return { replica: candidates[Math.floor(Math.random() * candidates.length)].id, reason: 'Math.random' };
        },
        dispose() {
          if (disposed) throw new Error('already disposed');
          disposed = true;
        },
      };
    },
  };
  const checks = new Set(runConformance(careless).map((f) => f.check));
  for (const check of ['empty-fleet', 'deterministic', 'dispose']) assert.ok(checks.has(check as never), `${check} in ${[...checks].join(', ')}`);
});

test('a slow strategy fails the budget; a generous budget lets it pass', () => {
  const slow: StrategyDefinition = {
    ...base,
    name: 'slow',
    create() {
      return {
        pick(_request, candidates) {
          const until = performance.now() + 1.5;
          while (performance.now() < until);
          return candidates[0] ? { replica: candidates[0].id, reason: 'eventually' } : null;
        },
      };
    },
  };
  assert.deepEqual(
    runConformance(slow, { budgetPicks: 50, steps: 20 }).map((f) => f.check),
    ['budget'],
  );
  assert.deepEqual(runConformance(slow, { budgetPicks: 50, steps: 20, budgetMs: 1000 }), []);
});

test('wrong shape, an incompatible sdk range and config defaults that fail the schema are reported', () => {
  assert.deepEqual(
    runConformance({ name: 'x' } as never).map((f) => f.check),
    ['shape', 'shape', 'shape'],
  );
  const future: StrategyDefinition = { ...base, sdk: '^2', name: 'future', create: () => ({ pick: () => null }) };
  assert.deepEqual(
    runConformance(future).map((f) => f.check),
    ['sdk-range'],
  );
  const badDefault: StrategyDefinition = {
    ...base,
    name: 'bad-default',
    configSchema: { type: 'object', properties: { threshold: { type: 'number', maximum: 1, default: 5 } } },
    create: () => ({ pick: () => null }),
  };
  const failures = runConformance(badDefault);
  assert.equal(failures[0]?.check, 'config-defaults');
  assert.match(failures[0].message, /threshold/);
});

test('a strategy that writes to its candidates is caught: fixtures are frozen', () => {
  const writer: StrategyDefinition = {
    ...base,
    name: 'writer',
    create: () => ({
      pick(_request, candidates) {
        if (!candidates[0]) return null;
        (candidates[0] as { saturated: boolean }).saturated = true;
        return { replica: candidates[0].id, reason: 'mutated' };
      },
    }),
  };
  assert.ok(runConformance(writer).some((f) => f.check === 'single-candidate'));
});

test('candidate shorthands fill the signals', () => {
  const c = candidate({ id: 'a', kvUsage: 0.5, loadedAdapters: ['x'] });
  assert.equal(c.signals.kvUsage, 0.5);
  assert.deepEqual(c.signals.loadedAdapters, ['x']);
  assert.equal(c.capacity.maxLoras, 4);
});

test('prefix-affinity: a full prefix memory stays bounded and fast (eviction in batches)', () => {
  const instance = prefixAffinity.create({ release_threshold: 0.85, max_entries: 20_000, min_match_blocks: 1 }, context({ seed: 1 }));
  const candidates = fleet(4);
  // CPU time, not wall time: on a busy machine the wall clock measures the neighbours.
  const started = process.cpuUsage();
  for (let i = 0; i < 5000; i++) {
    const routed = { ...request({}), prefixHashes: Array.from({ length: 100 }, (_, j) => (i * 1000 + j) >>> 0) };
    instance.pick(routed, candidates);
    instance.onRouted!(routed, candidates[i % 4].id);
  }
  const used = process.cpuUsage(started);
  const elapsed = (used.user + used.system) / 1000;
  const memory = (instance.exportState!() as { memory: { size: number } }).memory;
  assert.ok(memory.size <= 20_000, `${memory.size} entries kept`);
  // One entry at a time from the front of a Map took seconds here; batches take ~0.1 s.
  assert.ok(elapsed < 4000, `${elapsed.toFixed(0)} ms of CPU for 5,000 requests`);
});

test('reasons tell close loads apart: power-of-two never prints two different scores as equal', () => {
  assert.deepEqual(formatPair(0.0001, 0.0003), ['0.0001', '0.0003']);
  assert.deepEqual(formatPair(0.25, 0.5), ['0.250', '0.500']);
  assert.deepEqual(formatPair(0.1234, 0.1234), ['0.123', '0.123']);
});
