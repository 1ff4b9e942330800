// Priorities and overflow in the policy: what validate refuses, and the
// shedding curve as decide() applies it (pure: a manual fleet, a seeded env).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createEnv } from '../../core/decide/env.ts';
import { shedProbability, SHEDDING_DEFAULTS } from '../../core/decide/shed.ts';
import { formatProblem } from '../../core/diagnostics/problem.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import { buildSnapshot } from '../../core/decide/load.ts';
import { builtinRegistry } from '../helpers/builtins.ts';
import { ManualFleet, policyFrom, rejected, route } from '../helpers/core.ts';

const load = (files: Record<string, string>) => buildSnapshot(policyInputsFromTexts(files, { registry: builtinRegistry }));
const models = 'kind: models\nmodels:\n  - id: m\n    versions:\n      - version: v1\n';
const pool = (name: string, extra = '', id = name) =>
  `  - name: ${name}\n    model: m\n    version: v1\n${extra}    strategies: [least-load]\n    replicas:\n      - { id: ${id}, url: "http://127.0.0.1:9000" }\n`;
const tenants = (fields = '') => `kind: tenants\nanonymous: t\ntenants:\n  - { id: t, tier: free${fields} }\n`;

function problems(files: Record<string, string>): string[] {
  const result = load(files);
  assert.equal(result.snapshot, undefined);
  return result.problems.map(formatProblem);
}

test('validate refuses an overflow loop, an overflow into an unknown pool, and an unknown priority name', () => {
  const loop = problems({
    'models.yaml': models,
    'tenants.yaml': tenants(),
    'pools.yaml': `kind: pools\npools:\n${pool('a', '    overflow: b\n')}${pool('b', '    overflow: c\n')}${pool('c', '    overflow: a\n')}`,
  });
  assert.ok(
    loop.some((l) => /pools\.yaml:\d+:\d+: pool overflow loops: a -> b -> c -> a/.test(l)),
    loop.join('\n'),
  );
  const unknown = problems({
    'models.yaml': models,
    'tenants.yaml': tenants(),
    'pools.yaml': `kind: pools\npools:\n${pool('a', '    overflow: genral\n')}${pool('general')}`,
  });
  assert.ok(
    unknown.some((l) => /overflows into "genral", which is not a pool of m@v1 \(its pools: general\)/.test(l)),
    unknown.join('\n'),
  );
  const self = problems({ 'models.yaml': models, 'tenants.yaml': tenants(), 'pools.yaml': `kind: pools\npools:\n${pool('a', '    overflow: a\n')}` });
  assert.ok(self.some((l) => /overflows into itself/.test(l)));
  const name = problems({ 'models.yaml': models, 'tenants.yaml': tenants(', default_priority: nightly'), 'pools.yaml': `kind: pools\npools:\n${pool('a')}` });
  assert.ok(
    name.some((l) => /tenants\.yaml:\d+:\d+: "nightly" is not a priority name \(known: interactive, batch\)/.test(l)),
    name.join('\n'),
  );
  const above = problems({
    'models.yaml': models,
    'tenants.yaml': tenants(', default_priority: 3, max_priority: 1'),
    'pools.yaml': `kind: pools\npools:\n${pool('a')}`,
  });
  assert.ok(above.some((l) => /default_priority \(3\) is above max_priority \(1\)/.test(l)));
});

test("the default curve is llm-d's: min(sat^5 * 300, 1) for priority -1, steeper for lower ones, never for >= 0", () => {
  assert.equal(shedProbability(SHEDDING_DEFAULTS, 0.2, -1).toFixed(3), '0.096');
  assert.equal(shedProbability(SHEDDING_DEFAULTS, 0.3, -1).toFixed(3), '0.729');
  assert.equal(shedProbability(SHEDDING_DEFAULTS, 0.2, -2).toFixed(3), '0.192');
  assert.equal(shedProbability(SHEDDING_DEFAULTS, 0.5, -1), 1);
  assert.equal(shedProbability(SHEDDING_DEFAULTS, 0.99, 0), 0);
  assert.equal(shedProbability({ ...SHEDDING_DEFAULTS, mode: 'off' }, 0.99, -5), 0);
});

test('decide sheds about the curve share of batch at a given saturation, repeatably for a seed, and interactive never', () => {
  const snapshot = policyFrom({
    'models.yaml': models,
    'tenants.yaml': tenants(),
    'pools.yaml': `kind: pools\npools:\n${pool('a', '    capacity: { queue_depth: 100 }\n', 'r0')}`,
  });
  const fleet = new ManualFleet().set('r0', { queueDepth: 25, running: 1, kvUsage: 0.2 }); // saturation 0.25: p = 0.293
  const run = (seed: number, priority: string) => {
    const env = createEnv({ seed, now: () => 0 });
    let shed = 0;
    for (let i = 0; i < 1000; i++) {
      const d = route(snapshot, { model: 'm', priority }, fleet, env);
      if (!d.ok && rejected(d).rejection.code === 'shed_for_priority') shed++;
    }
    return shed;
  };
  const shed = run(3, 'batch');
  assert.ok(shed > 240 && shed < 350, `shed ${shed} of 1000 at p=0.29`);
  assert.equal(run(3, 'batch'), shed, 'same seed, same decisions');
  assert.equal(run(3, 'interactive'), 0);
  assert.equal(run(3, '7'), 0, 'an integer above the max is capped, still never shed');
});
