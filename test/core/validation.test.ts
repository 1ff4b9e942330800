// Policies are validated whole: schema and meaning, every problem at its
// FILE:LINE:COL, and nothing applied from a set that has one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildSnapshot } from '../../core/decide/load.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import { POLICIES } from '../helpers/core.ts';
import { formatProblem } from '../../core/diagnostics/problem.ts';
import { builtinRegistry } from '../helpers/builtins.ts';

const CLI = new URL('../../bin/switchyard.mjs', import.meta.url).pathname;
const load = (files: Record<string, string>) => buildSnapshot(policyInputsFromTexts(files, { registry: builtinRegistry }));
const models = 'kind: models\nmodels:\n  - id: m\n    versions:\n      - version: v1\n';
const tenants = 'kind: tenants\nanonymous: t\ntenants:\n  - { id: t, tier: free }\n';
const pools = (strategy = 'power-of-two', extra = '') =>
  `kind: pools\npools:\n  - name: general\n    model: m\n    version: v1\n    strategies: [${strategy}]\n    replicas:\n      - { id: r0, url: "http://127.0.0.1:9000" }\n${extra}`;

test('the bundled policies are valid', () => {
  const out = execFileSync(process.execPath, [CLI, 'validate', POLICIES], { encoding: 'utf8' });
  assert.match(out, /valid — 5 files, 4 models, 3 aliases, 5 tenants, 10 pools, 20 replicas, 4 pool rules/);
});

const problemsTable: { name: string; files: Record<string, string>; expect: RegExp[] }[] = [
  {
    name: 'an unknown pool in a pool rule, with its position',
    files: {
      'models.yaml': models,
      'tenants.yaml': tenants,
      'pools.yaml': pools(),
      'rules.yaml':
        'kind: rules\npool_rules:\n  rules:\n    - name: big\n      conditions: { all: [{ fact: promptTokens, operator: greaterThan, value: 9 }] }\n      event: { type: x, params: { pool: genral } }\n',
    },
    expect: [/^rules\.yaml:6:41: rule "big": unknown pool "genral" \(did you mean "general"\?\)$/],
  },
  {
    name: 'a rule whose event names nothing',
    files: {
      'models.yaml': models,
      'tenants.yaml': tenants,
      'pools.yaml': pools(),
      'rules.yaml': 'kind: rules\npool_rules:\n  rules:\n    - name: nothing\n      conditions: { all: [] }\n      event: { type: x }\n',
    },
    expect: [/^rules\.yaml:6:\d+: rule "nothing": its event names no pool \(event\.params\.pool\)$/],
  },
  {
    name: 'an unknown fact and an unknown operator',
    files: {
      'models.yaml': models,
      'tenants.yaml': tenants,
      'pools.yaml': pools(),
      'rules.yaml':
        'kind: rules\npool_rules:\n  rules:\n    - name: a\n      conditions: { all: [{ fact: promptTokenz, operator: greaterThan, value: 9 }] }\n      event: { type: x, params: { pool: general } }\n',
    },
    expect: [/^rules\.yaml:5:\d+: pool_rules\.rules\[0\]\.conditions\.all\[0\]\.fact: "promptTokenz" is not one of .*"promptTokens"/],
  },
  {
    name: 'an unregistered strategy',
    files: { 'models.yaml': models, 'tenants.yaml': tenants, 'pools.yaml': pools('power-of-too') },
    expect: [/^pools\.yaml:6:18: strategy "power-of-too" is not registered \(did you mean "power-of-two"\?\)$/],
  },
  {
    name: "a strategy config that fails the plugin's schema",
    files: { 'models.yaml': models, 'tenants.yaml': tenants, 'pools.yaml': pools('{ name: session-affinity, config: { release_threshold: 1.5 } }') },
    expect: [/^pools\.yaml:6:\d+: strategy "session-affinity": pools\[0\]\.strategies\[0\]\.config\.release_threshold: must be <= 1$/],
  },
  {
    name: 'an unknown model, an unknown version, a duplicate replica id',
    files: {
      'models.yaml': models,
      'tenants.yaml': tenants,
      'pools.yaml': pools(
        'power-of-two',
        '  - name: b\n    model: mm\n    version: v1\n    replicas: []\n  - name: c\n    model: m\n    version: v9\n    replicas: []\n  - name: d\n    model: m\n    version: v1\n    replicas:\n      - { id: r0, url: "http://127.0.0.1:9001" }\n',
      ),
    },
    expect: [
      /^pools\.yaml:10:12: unknown model "mm" \(did you mean "m"\?\)$/,
      /^pools\.yaml:15:14: "m" has no version "v9" \(it has v1\)$/,
      /^pools\.yaml:21:15: replica id "r0" is used twice$/,
    ],
  },
  {
    name: 'weights that add up to zero, and a version no pool serves',
    files: {
      'models.yaml': 'kind: models\nmodels:\n  - id: m\n    versions:\n      - { version: v1, weight: 0 }\n  - id: n\n    versions: [{ version: v1 }]\n',
      'tenants.yaml': tenants,
      'pools.yaml': pools(),
    },
    expect: [/^models\.yaml:5:7: the weights of "m" add up to 0/, /^models\.yaml:7:16: version "v1" of "n" gets traffic but no pool serves it$/],
  },
  {
    name: 'an unknown field, with a suggestion',
    files: { 'models.yaml': models, 'tenants.yaml': tenants, 'pools.yaml': pools('power-of-two', '    limits: { max_modle_len: 10 }\n') },
    expect: [/^pools\.yaml:9:15: pools\[0\]\.limits: unknown field "max_modle_len" \(did you mean "max_model_len"\?\)$/],
  },
  {
    name: 'an unknown tenant, an alias to an unknown model, a duplicate model',
    files: {
      'models.yaml': `${models}  - id: m\n    versions: [{ version: v2 }]\naliases:\n  - { name: big, model: nope }\n`,
      'tenants.yaml': 'kind: tenants\nanonymous: ghost\ntenants: []\n',
      'pools.yaml': pools(),
    },
    expect: [
      /^models\.yaml:6:9: model "m" is defined twice \(first at models\.yaml:3\)$/,
      /^models\.yaml:9:25: unknown model "nope"$/,
      /^tenants\.yaml:2:12: unknown tenant "ghost"$/,
    ],
  },
  {
    name: 'a half-written YAML file',
    files: { 'models.yaml': models, 'tenants.yaml': tenants, 'pools.yaml': 'kind: pools\npools:\n  - name: general\n    model: [m\n' },
    expect: [/^pools\.yaml:\d+:\d+: YAML syntax: /],
  },
  {
    name: 'an unknown kind',
    files: { 'x.yaml': 'kind: routes\n' },
    expect: [/^x\.yaml:1:7: kind "routes" is unknown; expected one of models, tenants, pools, rules, settings$/],
  },
];

for (const row of problemsTable) {
  test(`validation reports ${row.name}`, () => {
    const result = load(row.files);
    assert.equal(result.snapshot, undefined, 'an invalid policy set builds nothing');
    const lines = result.problems.map(formatProblem);
    for (const pattern of row.expect)
      assert.ok(
        lines.some((line) => pattern.test(line)),
        `expected ${pattern} in:\n${lines.join('\n')}`,
      );
    assert.equal(lines.length, row.expect.length, `exactly the expected problems:\n${lines.join('\n')}`);
  });
}

test('switchyard validate: one line per problem, exit 1, no stack trace; explain refuses too', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-validate-'));
  cpSync(POLICIES, dir, { recursive: true });
  const poolsFile = join(dir, 'pools.yaml');
  writeFileSync(
    poolsFile,
    readFileSync(poolsFile, 'utf8').replace('- power-of-two\n    replicas:', '- power-of-three\n    replicas:').replace('version: v1.5.0', 'version: v1.5.1'),
  );
  const run = spawnSync(process.execPath, [CLI, 'validate', dir], { encoding: 'utf8' });
  assert.equal(run.status, 1);
  const lines = run.stderr.trim().split('\n');
  assert.ok(
    lines.some((l) => /pools\.yaml:\d+:\d+: strategy "power-of-three" is not registered/.test(l)),
    run.stderr,
  );
  assert.ok(
    lines.some((l) => /pools\.yaml:\d+:\d+: "llama-3-70b-instruct" has no version "v1.5.1"/.test(l)),
    run.stderr,
  );
  assert.match(lines.at(-1)!, /^\d+ problems? in /);
  assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
});
