// `switchyard explain`: the same decide() the router runs, from the command line.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

const root = new URL('../../', import.meta.url).pathname;
const explain = (...args: string[]) => spawnSync(process.execPath, ['bin/switchyard.mjs', 'explain', ...args], { cwd: root, encoding: 'utf8' });

test('explain --json names model, version, pool, replica, reason, status and the trace', () => {
  const run = explain(
    '--request',
    'examples/requests/code-question.json',
    '--header',
    'Authorization: Bearer sk-demo-premium',
    '--header',
    'x-conversation-id: c-42',
    '--json',
  );
  assert.equal(run.status, 0, run.stderr);
  const d = JSON.parse(run.stdout);
  assert.equal(d.status, 200);
  assert.equal(d.model, 'qwen2.5-coder-32b-instruct');
  assert.equal(d.version, 'v1.0.0');
  assert.equal(d.adapter, null);
  assert.equal(d.pool, 'general');
  assert.match(d.replica, /^coder-general-\d$/);
  assert.match(d.reason, /^session-affinity: /);
  for (const step of ['model', 'pool', 'replica', 'admit']) assert.ok(d.trace[step].decidedBy, `trace.${step}`);
});

test('explain with --fleet shows the release valve and the deprioritized replica', () => {
  const run = explain(
    '--request',
    'examples/requests/short-question.json',
    '--header',
    'x-conversation-id: c-3',
    '--fleet',
    'examples/fleet/home-replica-busy.yaml',
  );
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /→ 200 admitted: llama-3-8b-instruct@v1\.0\.0 · pool general · replica l8-general-[01]/);
  assert.match(run.stdout, /session-affinity {2}passed: released l8-general-2: kv 0\.91 >= 0\.85/);
  assert.match(run.stdout, /l8-general-3 {2}deprioritized: saturated/);
});

test('explain of a rejection gives the status and Retry-After', () => {
  const run = spawnSync(process.execPath, ['bin/switchyard.mjs', 'explain', '--request', '-', '--json'], {
    cwd: root,
    encoding: 'utf8',
    input: JSON.stringify({ model: 'llama-3.1-405b-instruct', messages: [{ role: 'user', content: 'hi' }] }),
  });
  const d = JSON.parse(run.stdout);
  assert.equal(d.status, 503);
  assert.equal(d.retryAfter, 300);
  assert.equal(d.action.type, 'trigger_load');
});

test('explain: a bad file is one line and exit 1, a usage mistake exit 2 (as the README says), no stack trace', () => {
  const missing = explain('--request', 'nope.json');
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /^switchyard explain: cannot read request body nope\.json: /);
  assert.doesNotMatch(missing.stderr, /\n\s+at /);
  const badFleet = explain('--request', 'examples/requests/short-question.json', '--fleet', 'policies/models.yaml');
  assert.equal(badFleet.status, 1);
  assert.match(badFleet.stderr, /fleet file policies\/models\.yaml: /);
  const unknown = spawnSync(process.execPath, ['bin/switchyard.mjs', 'explain', '--bogus'], { cwd: root, encoding: 'utf8' });
  assert.equal(unknown.status, 2);
  assert.match(unknown.stderr, /unknown option --bogus; run 'switchyard explain --help' for its options/);
});
