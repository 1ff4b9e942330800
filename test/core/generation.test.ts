// The compiled policy is plain, frozen data and creates nothing; a generation
// built from it holds the runtime (strategy instances, caches, budgets), and
// several generations of one compiled policy share none of it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildGeneration, strategyInstances } from '../../core/decide/generation.ts';
import { formatProblem } from '../../core/diagnostics/problem.ts';
import { registryOf } from '../../core/plugins/registry.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import { compileInputs } from '../../core/policy/load.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';
import type { StrategyDefinition } from '../../sdk/index.ts';
import { POLICIES, policyDirTexts } from '../helpers/core.ts';

/** The built-ins, each create() counted, and one more strategy whose create() throws when its config says so. */
function countingRegistry() {
  const created: string[] = [];
  const counted = BUILTIN_STRATEGIES.map(
    (definition): StrategyDefinition<unknown> => ({
      ...definition,
      create(config, ctx) {
        created.push(definition.name);
        return (definition as StrategyDefinition<unknown>).create(config, ctx);
      },
    }),
  );
  return { registry: registryOf(counted), created };
}

test('compiling creates no strategy, and the compiled policy is frozen plain data', () => {
  const { registry, created } = countingRegistry();
  const compiled = compileInputs(policyInputsFromTexts(policyDirTexts(POLICIES), { registry }));
  assert.deepEqual(compiled.problems.map(formatProblem), []);
  const policy = compiled.policy!;
  assert.deepEqual(created, [], 'compiling created strategy instances');
  const pool = policy.pools[0];
  assert.ok(pool.strategies.length > 0);
  assert.equal('chain' in pool || 'candidateCache' in pool, false, 'a compiled pool holds runtime parts');
  for (const value of [
    policy,
    pool,
    pool.replicas,
    pool.replicas[0],
    pool.strategies[0],
    pool.capacity,
    policy.settings,
    [...policy.tenantsById.values()][0],
  ]) {
    assert.ok(Object.isFrozen(value), `not frozen: ${JSON.stringify(value)?.slice(0, 80)}`);
  }
  assert.throws(() => {
    (pool as { name: string }).name = 'changed';
  }, TypeError);
});

test('each generation of one compiled policy has its own instances and caches; a successor takes its state over', () => {
  const { registry, created } = countingRegistry();
  const policy = compileInputs(policyInputsFromTexts(policyDirTexts(POLICIES), { registry })).policy!;
  const first = buildGeneration(policy, { seed: 1 }).snapshot!;
  const perGeneration = created.length;
  assert.ok(perGeneration > 0);
  const second = buildGeneration(policy, { seed: 2 }).snapshot!;
  assert.equal(created.length, 2 * perGeneration);
  assert.equal(first.policy, second.policy);
  assert.notEqual(first.pools[0].candidateCache, second.pools[0].candidateCache);
  assert.notEqual(first.pools[0].chain[0].budget, second.pools[0].chain[0].budget);
  const mine = new Set(strategyInstances(first));
  assert.ok(strategyInstances(second).every((instance) => !mine.has(instance)));
  // The pools of a generation are the ones its lookups answer with.
  const [, pools] = [...first.poolsByVersion][0];
  assert.ok(pools.every((pool) => first.pools.includes(pool) && first.poolSteps.has(pool)));

  // State handed over: a slot of the same strategy gets its predecessor's exportState().
  const session = first.pools.find((pool) => pool.chain.some((slot) => slot.instance.exportState))!;
  const index = session.chain.findIndex((slot) => slot.instance.exportState);
  const handed: unknown[] = [];
  const spy = registryOf(
    BUILTIN_STRATEGIES.map(
      (definition): StrategyDefinition<unknown> => ({
        ...definition,
        create(config, ctx) {
          handed.push(ctx.previousState);
          return (definition as StrategyDefinition<unknown>).create(config, ctx);
        },
      }),
    ),
  );
  const respied = compileInputs(policyInputsFromTexts(policyDirTexts(POLICIES), { registry: spy })).policy!;
  buildGeneration(respied, { previous: first });
  const exported = session.chain[index].instance.exportState!();
  assert.ok(
    handed.some((state) => state !== undefined && JSON.stringify(state) === JSON.stringify(exported)),
    'no strategy was handed its predecessor state',
  );
});

test('a create() that throws is a problem where the policy names the strategy; nothing is half-built', () => {
  const failing: StrategyDefinition<unknown> = {
    name: 'grumpy',
    version: '1.0.0',
    sdk: '^1.0',
    create: () => {
      throw new Error('no thanks');
    },
  };
  const registry = registryOf([...BUILTIN_STRATEGIES, failing]);
  const files = policyDirTexts(POLICIES);
  const pools = Object.keys(files).find((name) => name.endsWith('pools.yaml'))!;
  files[pools] = files[pools].replace('  strategies:\n', '  strategies:\n    - grumpy\n');
  const compiled = compileInputs(policyInputsFromTexts(files, { registry }));
  assert.deepEqual(compiled.problems.map(formatProblem), [], 'compiling must not call create()');
  const built = buildGeneration(compiled.policy!);
  assert.equal(built.snapshot, undefined);
  assert.match(built.problems.map(formatProblem).join('\n'), /pools\.yaml:\d+:\d+: strategy "grumpy": create\(\) threw: no thanks/);
});
