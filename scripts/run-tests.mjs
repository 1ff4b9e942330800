#!/usr/bin/env node
// Runs every test/**/*.test.ts (and the examples' tests) with node's test runner (through tsx), and
// fails when no test ran: Node 20 can't take a quoted glob, and a runner that
// finds nothing would otherwise exit 0. Builds dist/ first (about a second):
// the tests that spawn `bin/switchyard.mjs` run the compiled JavaScript, as production does.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { buildDist } from './build.mjs';
import { freshCoverageDir, printCoverage } from './coverage.mjs';

const root = new URL('..', import.meta.url).pathname;
/** The whole run takes 7–13 minutes on the 2-core machine; CI stops at 90. */
const RUN_TIMEOUT_MS = 40 * 60_000;
const filters = process.argv.slice(2);

function findTests(dir) {
  const found = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) found.push(...findTests(path));
    else if (name.endsWith('.test.ts')) found.push(path);
  }
  return found;
}

const files = [...findTests(join(root, 'test')), ...findTests(join(root, 'examples'))]
  .map((f) => relative(root, f))
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)));
if (files.length === 0) {
  console.error('run-tests: no test files matched');
  process.exit(1);
}

await buildDist({ quiet: true });

// Coverage of core/ for a whole run (CI's), not for a part: SWITCHYARD_COVERAGE=1
// forces it on, =0 off. V8 counts as the code runs (a few % slower); the
// figure is printed after the tests' own summary.
const coverage = process.env.SWITCHYARD_COVERAGE ? process.env.SWITCHYARD_COVERAGE === '1' : filters.length === 0;
const coverageDir = coverage ? freshCoverageDir(root) : undefined;

mkdirSync(join(root, '.test-results'), { recursive: true });
// One file per run: two runs at once must not read each other's counts.
const tap = join(root, '.test-results', `results-${process.pid}.tap`);
const result = spawnSync(
  process.execPath,
  [
    '--import',
    'tsx',
    '--test',
    '--test-concurrency=2',
    // A test that hangs fails after 5 minutes (the slowest pass in about 60 s on a
    // loaded machine). Not --test-force-exit: with it, node 20 exits before the
    // TAP file below is written out, and the run counts no test.
    '--test-timeout=300000',
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    '--test-reporter=tap',
    `--test-reporter-destination=${tap}`,
    ...files,
  ],
  {
    cwd: root,
    stdio: 'inherit',
    env: coverageDir ? { ...process.env, NODE_V8_COVERAGE: coverageDir } : process.env,
    // A file whose hung test left something listening never exits: the whole run is bounded too.
    timeout: RUN_TIMEOUT_MS,
    killSignal: 'SIGKILL',
  },
);
if (result.error?.code === 'ETIMEDOUT') {
  console.error(`run-tests: the tests did not finish within ${RUN_TIMEOUT_MS / 60_000} minutes (a test hung); see the last file reported above`);
  process.exit(1);
}

const summary = readFileSync(tap, 'utf8');
rmSync(tap);
const count = (name) => Number(summary.match(new RegExp(`^# ${name} (\\d+)$`, 'm'))?.[1] ?? 0);
const tests = count('tests');
const passed = count('pass');
const failed = count('fail');
if (!(tests > 0)) {
  console.error('run-tests: no test ran');
  process.exit(1);
}
if (coverageDir) printCoverage(root, coverageDir);
console.log(`${passed} passed, ${failed} failed`);
process.exit(result.status === 0 && failed === 0 ? 0 : 1);
