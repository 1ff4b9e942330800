// A plugin can slow or break only itself: throws, bad answers and overruns
// skip that strategy; the request goes on (docs/design.md, "The plugin contract").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createEnv } from '../../core/decide/env.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';
import { registryOf } from '../../core/plugins/registry.ts';
import { buildSnapshot } from '../../core/decide/load.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import type { StrategyDefinition } from '../../sdk/index.ts';
import { ManualFleet, routeAdmitted } from '../helpers/core.ts';

const behaving = (name: string, pick: StrategyDefinition['create']): StrategyDefinition => ({ name, version: '1.0.0', sdk: '^1', create: pick });
const thrower = behaving('thrower', () => ({
  pick: () => {
    throw new Error('boom');
  },
}));
const liar = behaving('liar', () => ({ pick: () => ({ replica: 'not-a-candidate', reason: 'lies' }) }));
// An answer whose fields are getters that throw: the plugin's code runs again when the router reads them.
const trapper = behaving('trapper', () => ({
  pick: () => ({
    replica: 'r0',
    get reason(): string {
      throw new Error('trap');
    },
  }),
}));
const sluggish = behaving('sluggish', () => ({
  pick(_request, candidates) {
    // 3 ms of the CPU's work, however long the machine keeps the thread waiting meanwhile (that is not held against it).
    const start = process.cpuUsage();
    while (process.cpuUsage(start).user < 3000) {
      // a strategy doing far too much work per pick
    }
    return { replica: candidates[0].id, reason: 'slow but sure' };
  },
}));

function policyWith(chain: string[]) {
  const result = buildSnapshot(
    policyInputsFromTexts(
      {
        'models.yaml': 'kind: models\nmodels:\n  - id: m\n    versions: [{ version: v1 }]\n',
        'tenants.yaml': 'kind: tenants\nanonymous: t\ntenants:\n  - { id: t, tier: free }\n',
        'pools.yaml': `kind: pools\npools:\n  - name: general\n    model: m\n    version: v1\n    strategies: ${JSON.stringify(chain)}\n    replicas:\n      - { id: r0, url: "http://127.0.0.1:9000" }\n      - { id: r1, url: "http://127.0.0.1:9001" }\n`,
      },
      { registry: registryOf([...BUILTIN_STRATEGIES, thrower, liar, trapper, sluggish]) },
    ),
  );
  return result.snapshot!;
}

test('a strategy that throws or answers a replica it was not given is skipped; the request goes on', () => {
  const faults: string[] = [];
  const policy = policyWith(['thrower', 'liar', 'least-load']);
  const d = routeAdmitted(
    policy,
    { model: 'm' },
    new ManualFleet(),
    createEnv(),
    {},
    { onFault: (_p, strategy, fault) => faults.push(`${strategy}:${fault}`) },
  );
  assert.equal(d.value.status, 200);
  assert.equal(d.value.strategy, 'least-load');
  assert.deepEqual(faults, ['thrower:threw', 'liar:bad_answer']);
  const notes = d.trace.replica!.alternatives!.map((a) => `${a.name} ${a.note}`);
  assert.ok(notes.includes('thrower skipped: threw'));
  assert.ok(notes.includes('liar skipped: answered a replica it was not given'));
});

test('a strategy whose answer throws when read is skipped as a bad answer; the request goes on', () => {
  const faults: string[] = [];
  const d = routeAdmitted(
    policyWith(['trapper', 'least-load']),
    { model: 'm' },
    new ManualFleet(),
    createEnv(),
    {},
    { onFault: (_p, strategy, fault, detail) => faults.push(`${strategy}:${fault}:${detail}`) },
  );
  assert.equal(d.value.status, 200);
  assert.equal(d.value.strategy, 'least-load');
  assert.deepEqual(faults, ['trapper:bad_answer:its answer threw when read: trap']);
  assert.ok(d.trace.replica!.alternatives!.some((a) => a.name === 'trapper' && a.note === 'skipped: its answer could not be read'));
});

test('a strategy that keeps overrunning its 1 ms budget is suspended; one overrun alone does not change the route', () => {
  const faults: string[] = [];
  const policy = policyWith(['sluggish', 'round-robin']);
  const route = () =>
    routeAdmitted(
      policy,
      { model: 'm' },
      new ManualFleet(),
      createEnv(),
      { pickBudgetMs: 1 },
      { onFault: (_p, strategy, fault, detail) => faults.push(`${strategy}:${fault}:${detail}`) },
    );
  for (let i = 0; i < 10; i++) route(); // warm-up picks (JIT) are not held against a strategy
  assert.equal(faults.length, 0);
  // On a quiet machine every pick overruns. On a loaded one a pick the thread's wait excused (the wait may have
  // come before it) is not held against the strategy, and its next pick is measured exactly: a few more picks.
  const strategyAtFault: string[] = [];
  for (let i = 0; i < 30 && strategyAtFault.length < 3; i++) {
    const before = faults.length;
    const d = route();
    assert.equal(d.value.status, 200);
    if (faults.length > before) strategyAtFault.push(d.value.strategy);
  }
  assert.deepEqual(strategyAtFault, ['sluggish', 'sluggish', 'round-robin'], 'answers kept on the first two overruns; the third in 100 picks suspends it');
  assert.equal(route().value.strategy, 'round-robin', 'still suspended');
  assert.equal(faults.length, 3);
  assert.ok(faults.every((f) => f.startsWith('sluggish:over_budget:pick took')));
  assert.match(faults[2], /suspended for 10 s/);
});
