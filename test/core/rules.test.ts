// The compiled rules agree with json-rules-engine itself, including under
// concurrency (a shared Engine would not: docs/design.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileRuleSet, firstMatch, RuleCompileError, type RuleSpec } from '../../core/rules/compile.ts';
import { matchingRulesByEngine } from '../../core/rules/reference.ts';
import { seededRandom } from '../../sdk/index.ts';

const specs: RuleSpec[] = [
  {
    name: 'long',
    priority: 50,
    conditions: { all: [{ fact: 'promptTokens', operator: 'greaterThan', value: 16000 }] },
    event: { type: 'pool', params: { pool: 'long-context' } },
  },
  {
    name: 'premium',
    priority: 40,
    conditions: { all: [{ fact: 'tenantTier', operator: 'equal', value: 'premium' }] },
    event: { type: 'pool', params: { pool: 'premium' } },
  },
  {
    name: 'batch',
    priority: 30,
    conditions: {
      any: [
        { fact: 'priority', operator: 'equal', value: 'batch' },
        { fact: 'tenant', operator: 'in', value: ['etl', 'nightly'] },
      ],
    },
    event: { type: 'pool', params: { pool: 'batch' } },
  },
  {
    name: 'canary',
    priority: 20,
    conditions: { all: [{ fact: 'canary', operator: 'equal', value: true }, { not: { fact: 'hasCode', operator: 'equal', value: true } }] },
    event: { type: 'pool', params: { pool: 'canary' } },
  },
  {
    name: 'big-answer',
    priority: 20,
    conditions: {
      all: [
        { fact: 'maxTokens', operator: 'greaterThanInclusive', value: { fact: 'promptTokens' } },
        { fact: 'messageCount', operator: 'lessThan', value: 3 },
      ],
    },
    event: { type: 'pool', params: { pool: 'general' } },
  },
  {
    name: 'tagged',
    priority: 10,
    conditions: {
      all: [
        { fact: 'tags', operator: 'contains', value: 'x' },
        { fact: 'adapter', operator: 'notEqual', value: null },
      ],
    },
    event: { type: 'pool', params: { pool: 'lora' } },
  },
];

function randomFacts(random: () => number) {
  const pick = <T>(items: T[]) => items[Math.floor(random() * items.length)];
  return {
    promptTokens: Math.floor(random() * 40000),
    maxTokens: Math.floor(random() * 4000),
    messageCount: Math.floor(random() * 6),
    tenantTier: pick(['free', 'standard', 'premium']),
    tenant: pick(['etl', 'nightly', 'acme', 'team-x']),
    priority: pick(['interactive', 'batch']),
    canary: random() < 0.3,
    hasCode: random() < 0.5,
    adapter: pick([null, 'team-x-v3']),
    tags: pick([[], ['x'], ['y', 'x'], ['y']]),
  };
}

test('1,000 concurrent evaluations with different facts: compiled rules agree with json-rules-engine on every one', async () => {
  const set = compileRuleSet(specs, 'pool');
  const random = seededRandom(7);
  const all = Array.from({ length: 1000 }, () => randomFacts(random));
  const byEngine = await Promise.all(all.map((facts) => matchingRulesByEngine(specs, facts)));
  let checked = 0;
  all.forEach((facts, i) => {
    const compiled = set.rules.filter((rule) => rule.test(facts)).map((rule) => rule.name);
    assert.deepEqual(compiled, byEngine[i], `facts ${JSON.stringify(facts)}`);
    assert.equal(firstMatch(set, facts).rule?.name, byEngine[i][0]);
    checked++;
  });
  assert.equal(checked, 1000);
});

test('first match wins by priority, then file order', () => {
  const set = compileRuleSet(specs, 'pool');
  const facts = {
    promptTokens: 20000,
    tenantTier: 'premium',
    priority: 'batch',
    canary: true,
    hasCode: false,
    maxTokens: 1,
    messageCount: 1,
    tags: [],
    adapter: null,
    tenant: 'acme',
  };
  assert.equal(firstMatch(set, facts).rule?.name, 'long');
  const skipped = firstMatch(set, facts, (pool) => (pool === 'long-context' ? 'no such pool here' : null));
  assert.equal(skipped.rule?.name, 'premium');
  assert.deepEqual(skipped.skipped, [{ rule: 'long', why: 'no such pool here' }]);
});

test('rules json-rules-engine would refuse are refused, with the path', () => {
  assert.throws(
    () =>
      compileRuleSet([{ name: 'x', conditions: { all: [{ fact: 'a', operator: 'bogus', value: 1 }] }, event: { type: 't', params: { pool: 'p' } } }], 'pool'),
    (e: unknown) => e instanceof RuleCompileError && /unknown operator "bogus"/.test(e.message) && e.path.join('/') === '0/conditions/all/0/operator',
  );
  assert.throws(() => compileRuleSet([{ name: 'x', conditions: { all: [] }, event: { type: 't' } }], 'pool'), /its event names no pool/);
  assert.throws(() => compileRuleSet([{ name: 'x', conditions: { all: [], any: [] }, event: { type: 't', params: { pool: 'p' } } }], 'pool'), /not several/);
});

test('comparisons agree with json-rules-engine on facts of any type (numbers, NaN, numeric strings, null, missing)', async () => {
  const operators = ['equal', 'notEqual', 'lessThan', 'lessThanInclusive', 'greaterThan', 'greaterThanInclusive'];
  const values = [0, 300, -1.5, '300', null, true, 'premium'];
  const oddSpecs: RuleSpec[] = operators.flatMap((operator) =>
    values.map((value, v) => ({
      name: `${operator}-${v}`,
      conditions: { all: [{ fact: 'x', operator, value }] },
      event: { type: 't', params: { pool: 'p' } },
    })),
  );
  const set = compileRuleSet(oddSpecs, 'pool');
  const factValues = [0, -0, 299, 300, 301, -1.5, Number.NaN, Infinity, -Infinity, '300', '299.5', '', 'abc', null, undefined, true, false, 'premium', [300]];
  for (const x of factValues) {
    const facts = x === undefined ? {} : { x };
    const compiled = set.rules.filter((rule) => rule.test(facts)).map((rule) => rule.name);
    assert.deepEqual(compiled, await matchingRulesByEngine(oddSpecs, facts), `x = ${String(x)} (${typeof x})`);
  }
});
