// decide() is pure: the same inputs give the same decision, it reads no clock
// but the injected env's, and it changes nothing. What a decision sets off
// (quota taken, budgets counted, strategies told) happens in commit() and
// complete() only (core/decide/commit.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { commit, complete } from '../../core/decide/commit.ts';
import { decide, decisionJson, type Decision } from '../../core/decide/decide.ts';
import { createEnv } from '../../core/decide/env.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';
import { registryOf } from '../../core/plugins/registry.ts';
import { formatProblem } from '../../core/diagnostics/problem.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import { buildSnapshot } from '../../core/decide/load.ts';
import type { StrategyDefinition } from '../../sdk/index.ts';
import { admitted, facts, ManualFleet, POLICIES, policyDirTexts, rejected, type TestRequest } from '../helpers/core.ts';

const bundledFiles = policyDirTexts(POLICIES);

/** Counts every hook call a strategy gets, and every clock read it makes. */
const hooks = { picks: 0, routed: 0, completed: [] as boolean[] };
const counting: StrategyDefinition = {
  name: 'counting',
  version: '1.0.0',
  sdk: '^1',
  create: () => ({
    pick(_request, candidates) {
      hooks.picks++;
      return { replica: candidates[0].id, reason: 'first' };
    },
    onRouted() {
      hooks.routed++;
    },
    onCompleted(_request, _replica, ok) {
      hooks.completed.push(ok);
    },
  }),
};

function policy(files: Record<string, string>) {
  // Strategies get the same fixed clock: nothing in deciding reads the real one.
  const loaded = buildSnapshot(policyInputsFromTexts(files, { registry: registryOf([...BUILTIN_STRATEGIES, counting]) }), { seed: 1, now: () => 1_000 });
  if (!loaded.snapshot) throw new Error(loaded.problems.map(formatProblem).join('\n'));
  return loaded.snapshot;
}

const oneModel = (strategies: string[], quota = '') => ({
  'models.yaml': 'kind: models\nmodels:\n  - id: m\n    versions: [{ version: v1 }]\n',
  'tenants.yaml': `kind: tenants\nanonymous: t\ntenants:\n  - { id: t, tier: free${quota} }\n`,
  'pools.yaml': `kind: pools\npools:\n  - name: general\n    model: m\n    version: v1\n    strategies: ${JSON.stringify(strategies)}\n    replicas:\n      - { id: r0, url: "http://127.0.0.1:9000" }\n      - { id: r1, url: "http://127.0.0.1:9001" }\n`,
});

/** Runs `fn` with the process's clocks made to throw: whatever reads them fails the test. */
function withoutGlobalClocks<T>(fn: () => T): T {
  const dateNow = Date.now;
  const perfNow = performance.now;
  const forbidden = () => {
    throw new Error('decide() read a global clock');
  };
  Date.now = forbidden;
  performance.now = forbidden;
  try {
    return fn();
  } finally {
    Date.now = dateNow;
    performance.now = perfNow;
  }
}

/** A decision without its references into the snapshot (pools, strategy instances), which differ by identity. */
function comparable(d: Decision) {
  if (!d.ok) return { ...decisionJson(d), pickMs: d.handles?.chain.pickMs, incidents: d.handles?.chain.incidents };
  const { id, model, version, adapter, pool, tenant, conversationId, priority, promptTokens, maxTokens, prefixHashes } = d.handles.routed;
  return {
    ...decisionJson(d),
    replicaUrl: d.value.replicaUrl,
    upstreamModel: d.value.upstreamModel,
    strategy: d.value.strategy,
    cost: d.handles.charge,
    pickMs: d.handles.chain.pickMs,
    incidents: d.handles.chain.incidents,
    routed: { id, model, version, adapter, pool, tenant, conversationId, priority, promptTokens, maxTokens, prefixHashes },
  };
}

test('the same inputs give deep-equal decisions, and deciding reads no clock but the env', () => {
  const fleet = new ManualFleet(() => 1_000).set('l8-general-0', { kvUsage: 0.5, queueDepth: 2, running: 10 }).set('l8-general-1', { kvUsage: 0.2 });
  const requests: TestRequest[] = [
    { model: 'auto', content: 'Why does this fail?\n```js\nconst a = 1;\n```' },
    { model: 'chat-small', conversation: 'c-7', content: 'Hello again' },
    { model: 'chat-large', content: 'A canary draw without a conversation' },
    { model: 'chat-small', key: 'sk-demo-lora' },
    { model: 'chat-small', key: 'sk-demo-batch' },
    { model: 'no-such-model' },
  ];
  for (const r of requests) {
    const f = facts({ ...r, id: 'same' });
    // A snapshot's strategies carry state of their own (a seeded random source, a
    // round-robin counter): the same inputs are the same policy compiled the same way.
    const run = () => {
      const snapshot = policy(bundledFiles);
      const env = createEnv({ seed: 5, now: () => 1_000, clock: () => 0 });
      return withoutGlobalClocks(() => decide(f, snapshot, fleet, env));
    };
    const a = comparable(run());
    assert.deepEqual(a, comparable(run()), r.model);
  }
});

test('decide() takes no quota and tells no strategy; commit() does both, complete() reports the end', () => {
  const snapshot = policy(oneModel(['counting'], ', quotas: { requests_per_minute: 2 }'));
  const env = createEnv({ now: () => 0 });
  const fleet = new ManualFleet();
  hooks.picks = hooks.routed = 0;
  hooks.completed = [];

  const decisions: Decision[] = [];
  for (let i = 0; i < 5; i++) decisions.push(decide(facts({ model: 'm' }), snapshot, fleet, env));
  assert.ok(
    decisions.every((d) => d.ok),
    'five decisions, no quota taken: all fit a quota of 2',
  );
  assert.equal(hooks.picks, 5);
  assert.equal(hooks.routed, 0, 'deciding tells no strategy where the request went');

  const first = admitted(decisions[0]);
  commit(first, env);
  commit(admitted(decisions[1]), env);
  assert.equal(hooks.routed, 2);
  const over = rejected(decide(facts({ model: 'm' }), snapshot, fleet, env));
  assert.equal(over.rejection.status, 429, 'two commits took the quota of 2');
  assert.equal(over.rejection.code, 'quota_exceeded');
  commit(over, env);
  assert.equal(hooks.routed, 2, 'a rejection tells no strategy');

  complete(first, true);
  assert.deepEqual(hooks.completed, [true]);
});

test('pick budgets are counted by commit() on the env clock: a slow strategy is suspended only by what was committed', () => {
  const snapshot = policy(oneModel(['counting', 'round-robin']));
  let t = 0;
  // Every clock read advances 5 ms: each pick takes 5 ms against a 1 ms budget.
  const env = createEnv({ now: () => 0, clock: () => (t += 5) });
  const faults: string[] = [];
  const fleet = new ManualFleet();
  const route = () => decide(facts({ model: 'm' }), snapshot, fleet, env, { pickBudgetMs: 1 });
  // Uncommitted decisions count nothing, however many.
  for (let i = 0; i < 20; i++) assert.equal(admitted(route()).value.strategy, 'counting');
  const report = { onFault: (_p: unknown, s: string, f: string) => void faults.push(`${s}:${f}`) };
  for (let i = 0; i < 10; i++) commit(route(), env, report); // warm-up picks
  assert.equal(faults.length, 0);
  for (let i = 0; i < 2; i++) commit(route(), env, report);
  assert.deepEqual([...faults], ['counting:over_budget', 'counting:over_budget']);
  const third = admitted(route());
  assert.equal(third.value.strategy, 'round-robin', 'a third overrun would suspend: its answer is not used');
  commit(third, env, report);
  assert.equal(faults.length, 3);
  assert.equal(admitted(route()).value.strategy, 'round-robin', 'suspended');
});

test('callers read a decision by narrowing on `admitted`, never with a non-null assertion', () => {
  const callers = ['core/serve/proxy.ts', 'core/serve/forward.ts', 'sim/simulator/simulator.ts', 'cli/explain.ts', 'core/observe/decision-log.ts'];
  for (const file of callers) {
    const text = readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');
    const asserted = text.match(/\b(decision|retry|first|d)\.(replica|model|version|pool|poolRef|routed|rejection|tenant|strategy|upstreamModel|action)!/g);
    assert.equal(asserted, null, `${file}: ${asserted?.join(', ')}`);
  }
});
