// The policy language catches mistakes: every rule's operator and value are
// checked against the fact's type (and enum) before a policy goes live, with
// FILE:LINE:COL and a hint. json-rules-engine alone accepts all of these, and
// the rule then silently never matches.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildSnapshot } from '../../core/decide/load.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import { RULE_FACTS } from '../../core/rules/rule-facts.ts';
import { readFileSync } from 'node:fs';
import { formatProblem } from '../../core/diagnostics/problem.ts';
import { builtinRegistry } from '../helpers/builtins.ts';

const models =
  'kind: models\nmodels:\n  - id: m\n    versions: [{ version: v1 }]\n  - id: coder\n    versions: [{ version: v1 }]\naliases:\n  - { name: auto, cascade: auto }\n';
const tenants = 'kind: tenants\nanonymous: t\ntenants:\n  - { id: t, tier: free }\n';
const pools =
  'kind: pools\npools:\n  - name: general\n    model: m\n    version: v1\n    strategies: [power-of-two]\n    replicas: [{ id: r0, url: "http://127.0.0.1:9000" }]\n' +
  '  - name: general\n    model: coder\n    version: v1\n    strategies: [power-of-two]\n    replicas: [{ id: r1, url: "http://127.0.0.1:9001" }]\n';

/** A pool rule (line 5 holds the condition) and a cascade rule (line 11). */
function rulesFile(poolCondition: string, cascadeCondition = '{ fact: promptTokens, operator: lessThan, value: 300 }'): string {
  return [
    'kind: rules',
    'pool_rules:',
    '  rules:',
    '    - name: p',
    `      conditions: { all: [${poolCondition}] }`,
    '      event: { type: x, params: { pool: general } }',
    'cascades:',
    '  - name: auto',
    '    default_model: m',
    '    rules:',
    `      - { name: c, conditions: { all: [${cascadeCondition}] }, event: { type: x, params: { model: coder } } }`,
    '',
  ].join('\n');
}

function problems(poolCondition: string, cascadeCondition?: string): string[] {
  const result = buildSnapshot(
    policyInputsFromTexts(
      { 'models.yaml': models, 'tenants.yaml': tenants, 'pools.yaml': pools, 'rules.yaml': rulesFile(poolCondition, cascadeCondition) },
      { registry: builtinRegistry },
    ),
  );
  return result.problems.map(formatProblem);
}

const refused: [string, string, RegExp][] = [
  [
    'a size written as 16k against a number',
    '{ fact: promptTokens, operator: greaterThan, value: 16k }',
    /^rules\.yaml:5:\d+: rule "p": promptTokens is a number; "16k" is not one \(write 16000, not 16k\)$/,
  ],
  [
    'a word against a number',
    '{ fact: maxTokens, operator: equal, value: "sixteen-thousand" }',
    /rule "p": maxTokens is a number; "sixteen-thousand" is not one$/,
  ],
  [
    'a misspelt enum value, with a suggestion',
    '{ fact: priority, operator: equal, value: bach }',
    /^rules\.yaml:5:\d+: rule "p": priority is one of interactive, batch; "bach" is not \(did you mean "batch"\?\)$/,
  ],
  [
    'an unknown endpoint in a list',
    '{ fact: endpoint, operator: in, value: [chat, images] }',
    /rule "p": endpoint is one of chat, completions, embeddings, responses, messages, tokenize, detokenize, rerank, score, pooling, classify, transcriptions, translations; "images" is not$/,
  ],
  ['a quoted boolean', '{ fact: hasCode, operator: equal, value: "true" }', /rule "p": hasCode is true or false; "true" is not \(write true without quotes\)$/],
  [
    'a number comparison on a string',
    '{ fact: tenantTier, operator: greaterThan, value: 3 }',
    /rule "p": greaterThan compares numbers; tenantTier is a string$/,
  ],
  [
    'contains on a string',
    '{ fact: model, operator: contains, value: llama }',
    /rule "p": contains looks inside a list; model is a string \(use in: \[\.\.\.\] to match one of several values\)$/,
  ],
  ['in without a list', '{ fact: tenant, operator: in, value: acme }', /rule "p": in takes a list of values/],
  ['a number in a list of strings', '{ fact: tenant, operator: notIn, value: [acme, 7] }', /rule "p": tenant is a string; 7 is not$/],
  [
    'two facts of different types compared',
    '{ fact: promptTokens, operator: greaterThan, value: { fact: tenant } }',
    /rule "p": promptTokens is a number but tenant is a string: they can't be compared$/,
  ],
  [
    'a list decorator on a scalar fact',
    '{ fact: model, operator: "someFact:equal", value: m }',
    /rule "p": someFact: needs a list-valued fact; model is a string$/,
  ],
  ['not: keeps the type check', '{ fact: stream, operator: "not:equal", value: 1 }', /rule "p": stream is true or false; 1 is not$/],
  ['an equality on the prompt text', '{ fact: prompt, operator: equal, value: hello }', /rule "p": the prompt's text takes containsAny or matches/],
  [
    'a text operator on another fact',
    '{ fact: model, operator: containsAny, value: [llama] }',
    /rule "p": containsAny applies to the prompt's text \(fact: prompt\), not to model$/,
  ],
  ['an empty keyword list', '{ fact: prompt, operator: containsAny, value: [] }', /rule "p": containsAny takes a non-empty list of keywords/],
  [
    'a backreference (not linear-time)',
    '{ fact: prompt, operator: matches, value: "(a)\\\\1" }',
    /rule "p": not a linear-time \(RE2\) regular expression: .*invalid escape sequence/,
  ],
  [
    'lookahead (not linear-time)',
    '{ fact: prompt, operator: matches, value: "(?=select)" }',
    /rule "p": not a linear-time \(RE2\) regular expression: .*unsupported Perl syntax/,
  ],
];

for (const [name, condition, pattern] of refused) {
  test(`validate refuses ${name}`, () => {
    const lines = problems(condition);
    assert.ok(
      lines.some((line) => pattern.test(line)),
      `expected ${pattern} in:\n${lines.join('\n')}`,
    );
    assert.equal(lines.length, 1, lines.join('\n'));
  });
}

test('validate refuses a cascade rule on a fact known only once the model is chosen', () => {
  const lines = problems('{ fact: promptTokens, operator: greaterThan, value: 9 }', '{ fact: canary, operator: equal, value: true }');
  assert.equal(lines.length, 1, lines.join('\n'));
  assert.match(lines[0], /^rules\.yaml:11:\d+: rule "c": canary is known only once the model is chosen: pool rules may use it, cascades may not$/);
});

const accepted: [string, string][] = [
  ['numbers compared to numbers', '{ fact: promptTokens, operator: greaterThanInclusive, value: 16000 }'],
  ['a fact compared to a fact of its type', '{ fact: maxTokens, operator: greaterThan, value: { fact: promptTokens } }'],
  ['enum values in a list', '{ fact: endpoint, operator: notIn, value: [embeddings] }'],
  ['null for a nullable fact', '{ fact: adapter, operator: notEqual, value: null }'],
  ['someValue: over a list of values', '{ fact: tenantTier, operator: "someValue:equal", value: [premium, standard] }'],
  ['keywords in the prompt', '{ fact: prompt, operator: containsAny, value: [sql, select, "join on"] }'],
  ['a negated RE2 pattern', '{ fact: prompt, operator: "not:matches", value: "(?i)\\\\bdrop\\\\s+table\\\\b" }'],
];

for (const [name, condition] of accepted) {
  test(`validate accepts ${name}`, () => {
    assert.deepEqual(problems(condition), []);
  });
}

test('every fact rules see is in the rules schema, and every schema fact has a type', () => {
  const schema = JSON.parse(readFileSync(new URL('../../core/policy/schemas/rules.schema.json', import.meta.url), 'utf8'));
  assert.deepEqual([...schema.definitions.fact.enum].sort(), Object.keys(RULE_FACTS).sort());
  const documented = readFileSync(new URL('../../docs/policies.md', import.meta.url), 'utf8');
  for (const fact of Object.keys(RULE_FACTS)) assert.ok(documented.includes(`\`${fact}\``), `docs/policies.md documents ${fact}`);
});
