// What the CLI says when something is wrong: a usage mistake names the
// option and where the options are (exit 2); a bad file is one
// FILE:LINE:COL line in its own format (exit 1, as the README says); a
// typo gets a did-you-mean; one bad character gets one problem, not dozens.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = new URL('../../', import.meta.url).pathname;
const STACK = /^\s+at .+:\d+:\d+\)?$/m;
const run = (args: string[]) => spawnSync(process.execPath, ['bin/switchyard.mjs', ...args], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });

test('usage mistakes name the option and the help to read, exit 2', () => {
  const cases: [string[], RegExp][] = [
    [['validate', '--bogus'], /^switchyard validate: unknown option --bogus; run 'switchyard validate --help' for its options$/m],
    [['explain', '--request'], /^switchyard explain: --request needs a value; run 'switchyard explain --help' for its options$/m],
    [['explain', '--json=yes', '--request', 'x.json'], /^switchyard explain: --json takes no value; run 'switchyard explain --help' for its options$/m],
  ];
  for (const [args, message] of cases) {
    const r = run(args);
    assert.equal(r.status, 2, args.join(' '));
    assert.match(r.stderr, message);
    assert.doesNotMatch(r.stderr, /positional|'--'/);
  }
});

test('explain: a JSON request with a syntax error is FILE:LINE:COL in JSON terms, exit 1; an unknown --fleet replica is named with a did-you-mean', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-cli-msg-'));
  try {
    writeFileSync(join(dir, 'bad.json'), '{"model": "chat-small",\n  "messages": [}\n');
    const bad = run(['explain', '--request', join(dir, 'bad.json')]);
    assert.equal(bad.status, 1, bad.stderr);
    assert.match(bad.stderr, /bad\.json:2:16: JSON: Unexpected token '\}' \(request body\)/);
    assert.doesNotMatch(bad.stderr, /YAML/);
    assert.doesNotMatch(bad.stderr, STACK);

    writeFileSync(join(dir, 'ok.json'), JSON.stringify({ model: 'chat-small', messages: [{ role: 'user', content: 'hi' }] }));
    writeFileSync(join(dir, 'fleet.yaml'), 'replicas:\n  l8-general-0: { kv_usage: 0.2 }\n  l8-generl-1: { kv_usage: 0.1 }\n');
    const fleet = run(['explain', '--request', join(dir, 'ok.json'), '--fleet', join(dir, 'fleet.yaml')]);
    assert.equal(fleet.status, 1, fleet.stderr);
    assert.match(fleet.stderr, /replica "l8-generl-1" is not in the policy \(did you mean "l8-general-1"\?\)/);
    assert.doesNotMatch(fleet.stderr + fleet.stdout, STACK);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('validate: one tab is one problem; a pool name cut short gets a did-you-mean', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-cli-msg-'));
  try {
    cpSync(join(ROOT, 'policies'), dir, { recursive: true });
    const pools = readFileSync(join(dir, 'pools.yaml'), 'utf8').split('\n');
    const at = pools.findIndex((l) => /^ {4}version: /.test(l));
    pools[at] = `\t${pools[at].slice(2)}`;
    writeFileSync(join(dir, 'pools.yaml'), pools.join('\n'));
    const tab = run(['validate', dir]);
    assert.equal(tab.status, 1);
    assert.equal(tab.stderr.match(/pools\.yaml:/g)?.length, 1, tab.stderr);
    assert.match(
      tab.stderr,
      new RegExp(`pools\\.yaml:${at + 1}:1: YAML syntax: Tabs are not allowed as indentation \\(the parser found \\d+ more after it; fix this one first\\)`),
    );

    writeFileSync(join(dir, 'pools.yaml'), readFileSync(join(ROOT, 'policies/pools.yaml'), 'utf8'));
    writeFileSync(join(dir, 'rules.yaml'), readFileSync(join(ROOT, 'policies/rules.yaml'), 'utf8').replace('pool: long-context', 'pool: long'));
    const pool = run(['validate', dir]);
    assert.equal(pool.status, 1);
    assert.match(pool.stderr, /unknown pool "long" \(did you mean "long-context"\?\)/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
