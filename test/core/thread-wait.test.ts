// A pick's budget holds the strategy's own time, not the time the router's
// thread waited for a CPU meanwhile (core/decide/thread-wait.ts): on a loaded
// host a descheduled pick must not suspend a healthy strategy, and one that
// does too much work is suspended all the same.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { PickBudget } from '../../core/decide/budget.ts';
import { createEnv } from '../../core/decide/env.ts';
import { buildSnapshot } from '../../core/decide/load.ts';
import { openThreadWait, parseWaitMs, sampledWait, SAMPLE_EVERY_MS } from '../../core/decide/thread-wait.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import { registryOf } from '../../core/plugins/registry.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';
import type { StrategyDefinition } from '../../sdk/index.ts';
import { ManualFleet, routeAdmitted } from '../helpers/core.ts';

test('schedstat text: the second field is the wait, in ns; anything else reads as unknown', () => {
  assert.equal(parseWaitMs('316714633 654439558 558\n'), 654.439558);
  assert.equal(parseWaitMs('0 0 0\n'), 0);
  for (const bad of ['', '12', '12 x 3', '12 -5 3', '12 1e400 3', '1 2'] as const) assert.ok(Number.isNaN(parseWaitMs(bad)), bad);
});

test('the wait is sampled at most once per interval, and an overrun reads it afresh', () => {
  let reads = 0;
  let waited = 100;
  const wait = sampledWait(() => (reads++, waited));
  assert.equal(wait.sample(0), true);
  assert.equal(wait.sample(SAMPLE_EVERY_MS - 1), false);
  assert.equal(reads, 1, 'one sample within the interval');
  assert.equal(wait.sample(SAMPLE_EVERY_MS - 1, true), true, 'an exact sample reads whenever asked');
  assert.equal(reads, 2);
  waited += 7;
  assert.equal(wait.waitedSinceSample(SAMPLE_EVERY_MS - 0.5), 7);
  assert.equal(reads, 3);
  wait.sample(SAMPLE_EVERY_MS + 1);
  assert.equal(reads, 3, 'the fresh read became the sample');
  assert.equal(wait.waitedSinceSample(SAMPLE_EVERY_MS + 2), 0);
  waited = NaN;
  assert.equal(wait.waitedSinceSample(SAMPLE_EVERY_MS + 3), 0, 'unreadable: nothing excused');
});

test('a budget holds only the time not spent waiting for a CPU', () => {
  const budget = new PickBudget();
  const clock = () => 0;
  for (let i = 0; i < 10; i++) budget.count(0.01, 0, 1, clock); // warm-up
  for (let i = 0; i < 20; i++) {
    assert.equal(budget.wouldSuspend(30, 29.5, 1), false);
    assert.equal(budget.count(30, 29.5, 1, clock), undefined, 'explained by waiting: not an overrun');
  }
  assert.equal(budget.count(0.5, 0, 1, clock), undefined);
  assert.equal(budget.count(30, 29.5, 1, clock), undefined);
  assert.equal(budget.exactNext, true, 'excused by a wait that may predate the pick: the next is measured exactly');
  assert.equal(budget.count(3, 2.5, 1, clock), undefined, 'measured exactly, the wait explains it');
  assert.equal(budget.exactNext, false, 'an exact measure stands');
  assert.equal(budget.count(0.5, 0, 1, clock), undefined);
  assert.equal(budget.exactNext, false);
  assert.equal(budget.count(30, 20, 1, clock), 'pick took 30.00 ms (budget 1 ms, 20.00 ms of it waiting for a CPU)');
  assert.equal(budget.count(3, 0, 1, clock), 'pick took 3.00 ms (budget 1 ms)');
  assert.equal(budget.wouldSuspend(3, 0, 1), true);
  assert.match(budget.count(3, 0, 1, clock)!, /suspended for 10 s/);
});

// The real thing: the router's thread shares one CPU with two busy processes, so the kernel deschedules it for
// milliseconds in the middle of picks that take 0.4 ms of work each.
const cpuList = spawnSync('taskset', ['-cp', String(process.pid)], { encoding: 'utf8' });
const ownCpus = cpuList.status === 0 ? /list:\s*(\S+)/.exec(cpuList.stdout)?.[1] : undefined;
const canStarve = process.platform === 'linux' && ownCpus !== undefined && openThreadWait() !== undefined;

function spinFor(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // the strategy's own work
  }
}
const steady = (): StrategyDefinition => ({
  name: 'steady',
  version: '1.0.0',
  sdk: '^1',
  create: () => ({
    pick(_request, candidates) {
      spinFor(0.4);
      return { replica: candidates[0].id, reason: 'steady' };
    },
  }),
});

function steadyPolicy() {
  const pools = `kind: pools\npools:\n  - name: general\n    model: m\n    version: v1\n    strategies: [steady, round-robin]\n    replicas:\n      - { id: r0, url: "http://127.0.0.1:9000" }\n      - { id: r1, url: "http://127.0.0.1:9001" }\n`;
  const inputs = policyInputsFromTexts(
    {
      'models.yaml': 'kind: models\nmodels:\n  - id: m\n    versions: [{ version: v1 }]\n',
      'tenants.yaml': 'kind: tenants\nanonymous: t\ntenants:\n  - { id: t, tier: free }\n',
      'pools.yaml': pools,
    },
    { registry: registryOf([...BUILTIN_STRATEGIES, steady()]) },
  );
  return buildSnapshot(inputs).snapshot!;
}

/** Routes `n` requests; how many went past the steady strategy, and how many of its picks overran on the wall clock. */
function route(n: number, env: ReturnType<typeof createEnv>) {
  const policy = steadyPolicy();
  let skipped = 0;
  let overran = 0;
  for (let i = 0; i < n; i++) {
    const d = routeAdmitted(policy, { model: 'm' }, new ManualFleet(), env, { pickBudgetMs: 1 });
    if (d.value.strategy !== 'steady') skipped++;
    if ((d.handles.chain.pickMs[0] ?? 0) > 1) overran++;
  }
  return { skipped, overran };
}

test('descheduled in the middle of its picks, a strategy doing 0.4 ms of work is not suspended', {
  skip: !canStarve && 'needs Linux schedstat and taskset',
}, (t) => {
  const cpu = ownCpus!.split(/[,-]/)[0];
  const busy: ChildProcess[] = [];
  t.after(() => {
    for (const child of busy) child.kill('SIGKILL');
    spawnSync('taskset', ['-cp', ownCpus!, String(process.pid)]);
  });
  assert.equal(spawnSync('taskset', ['-cp', cpu, String(process.pid)]).status, 0);
  for (let i = 0; i < 2; i++) busy.push(spawn('taskset', ['-c', cpu, process.execPath, '-e', 'for (;;) {}'], { stdio: 'ignore' }));
  spinFor(50); // the busy processes are running

  // Without the thread's wait (an injected clock, as the simulator's), the wall clock suspends it.
  const wallOnly = route(800, createEnv({ clock: () => performance.now() }));
  assert.ok(wallOnly.overran >= 3, `the machine deschedules picks: ${wallOnly.overran} overran`);
  assert.ok(wallOnly.skipped > 0, 'judged on the wall clock alone, it is suspended');

  const judged = route(800, createEnv());
  assert.ok(judged.overran >= 3, `the machine deschedules picks: ${judged.overran} overran`);
  assert.equal(judged.skipped, 0, `judged on its own time it keeps every request (${judged.overran} picks overran on the wall clock)`);
});
