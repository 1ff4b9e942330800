// The SDK's semver promise across the 1.2 freeze: a strategy written for
// `sdk: ^1.0`, when the candidate array was its own, sorts it in place and
// keeps working (it is given a copy; the router's shared list keeps its
// order); a strategy declaring ^1.2 or later gets the shared, frozen list,
// where sorting throws and the strategy is skipped like any throw.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createEnv } from '../../core/decide/env.ts';
import { registryOf } from '../../core/plugins/registry.ts';
import { buildSnapshot } from '../../core/decide/load.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';
import type { Candidate, StrategyDefinition } from '../../sdk/index.ts';
import { ManualFleet, routeAdmitted } from '../helpers/core.ts';

/** As a 1.0 plugin was written: sort the given array by in-flight requests, take the first. */
const sorter = (name: string, sdk: string, seen: string[][]): StrategyDefinition => ({
  name,
  version: '1.0.0',
  sdk,
  create: () => ({
    pick(_request, candidates) {
      const list = candidates as Candidate[];
      list.sort((a, b) => a.signals.inFlight - b.signals.inFlight);
      seen.push(list.map((c) => c.id));
      return { replica: list[0].id, reason: 'least in flight, sorted in place' };
    },
  }),
});

/** Records the order the router's list is in when it reaches the next strategy. */
const observer = (seen: string[][]): StrategyDefinition => ({
  name: 'observer',
  version: '1.0.0',
  sdk: '^1.2',
  create: () => ({ pick: (_request, candidates) => (seen.push(candidates.map((c) => c.id)), { pass: true, reason: 'only looks' }) }),
});

function policyWith(chain: string[], strategies: StrategyDefinition[]) {
  const result = buildSnapshot(
    policyInputsFromTexts(
      {
        'models.yaml': 'kind: models\nmodels:\n  - id: m\n    versions: [{ version: v1 }]\n',
        'tenants.yaml': 'kind: tenants\nanonymous: t\ntenants:\n  - { id: t, tier: free }\n',
        'pools.yaml': `kind: pools\npools:\n  - name: general\n    model: m\n    version: v1\n    strategies: ${JSON.stringify(chain)}\n    replicas:\n${['r0', 'r1', 'r2'].map((id, i) => `      - { id: ${id}, url: "http://127.0.0.1:${9000 + i}" }`).join('\n')}\n`,
      },
      { registry: registryOf([...BUILTIN_STRATEGIES, ...strategies]) },
    ),
  );
  assert.deepEqual(result.problems ?? [], []);
  return result.snapshot!;
}

test('a ^1.0 strategy that sorts its candidates in place keeps working, on a copy: the shared list keeps its order', () => {
  const sorted: string[][] = [];
  const observed: string[][] = [];
  const policy = policyWith(['observer', 'sorter', 'round-robin'], [observer(observed), sorter('sorter', '^1.0', sorted)]);
  const fleet = new ManualFleet().set('r0', { inFlight: 5 }).set('r1', { inFlight: 3 }).set('r2', { inFlight: 0 });
  for (let i = 0; i < 3; i++) {
    const d = routeAdmitted(policy, { model: 'm' }, fleet, createEnv());
    assert.equal(d.value.strategy, 'sorter');
    assert.equal(d.value.replica, 'r2');
  }
  assert.deepEqual(sorted.at(-1), ['r2', 'r1', 'r0']);
  // Every decision's shared list is still in pool order: the sort touched only the sorter's copy.
  assert.deepEqual(observed, [
    ['r0', 'r1', 'r2'],
    ['r0', 'r1', 'r2'],
    ['r0', 'r1', 'r2'],
  ]);
});

test('a ^1.2 strategy gets the shared frozen list: sorting it throws, it is skipped, the chain goes on', () => {
  const faults: string[] = [];
  const policy = policyWith(['sorter-1-2', 'round-robin'], [sorter('sorter-1-2', '^1.2', [])]);
  const d = routeAdmitted(
    policy,
    { model: 'm' },
    new ManualFleet(),
    createEnv(),
    {},
    { onFault: (_p, strategy, fault) => faults.push(`${strategy}:${fault}`) },
  );
  assert.equal(d.value.strategy, 'round-robin');
  assert.deepEqual(faults, ['sorter-1-2:threw']);
});
