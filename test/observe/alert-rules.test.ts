// The alerting rules in deploy/prometheus are valid Prometheus rules, and
// their unit tests (which alert fires for which series, and which do not)
// pass under promtool.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';

const RULES_DIR = new URL('../../deploy/prometheus/', import.meta.url).pathname;

function promtool(...args: string[]) {
  try {
    execFileSync('promtool', ['--version'], { stdio: 'ignore' });
  } catch {
    assert.fail('promtool is not installed: .ci/run installs it (apt-get install -y prometheus)');
  }
  return spawnSync('promtool', args, { cwd: RULES_DIR, encoding: 'utf8' });
}

test('the alerting rules pass promtool check rules', () => {
  const result = promtool('check', 'rules', 'alerts.yaml');
  assert.equal(result.status, 0, result.stdout + result.stderr);
  assert.match(result.stdout, /SUCCESS: \d+ rules found/);
});

test('the alerting rules pass their promtool unit tests', () => {
  const result = promtool('test', 'rules', 'alerts.test.yaml');
  assert.equal(result.status, 0, result.stdout + result.stderr);
  assert.match(result.stdout, /SUCCESS/);
});
