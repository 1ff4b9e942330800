// The shadow policy in the running router: it decides sampled requests again
// without acting, and reports where it differs (docs/changing-policy.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Shadow } from '../../core/shadow/shadow.ts';
import { fixedPolicy } from '../../core/serve/fixed-policy.ts';
import { policyFrom } from '../helpers/core.ts';
import { json, startTestRouter, until } from '../helpers/router.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';
import type { StrategyDefinition } from '../../sdk/index.ts';
import { livePolicyFiles, longPromptPolicyFiles, promptOf, writePolicyDir } from './policies.ts';

async function send(url: string, id: string, content: string, conversation: string) {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': id, 'x-conversation-id': conversation },
    body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content }], max_tokens: 4 }),
  });
  await response.arrayBuffer();
  return { status: response.status, pool: response.headers.get('x-switchyard-pool'), replica: response.headers.get('x-switchyard-replica') };
}

// A loaded test machine must not push a request over the shadow's time budget where a test counts every one.
const UNBOUNDED = { maxBusyMsPerSecond: Infinity };

test('a shadow policy that sends long prompts elsewhere differs exactly on those requests, at the pool step, by its rule', async () => {
  const shadow = new Shadow({ builtins: BUILTIN_STRATEGIES, watch: false, sampling: UNBOUNDED });
  const set = await shadow.set(writePolicyDir(longPromptPolicyFiles(), 'shadow'));
  assert.equal(set.result, 'live');
  const r = await startTestRouter({}, { policy: fixedPolicy(policyFrom(livePolicyFiles())), shadow });
  try {
    const long = new Set<string>();
    for (let i = 0; i < 12; i++) {
      const isLong = i % 3 === 1;
      const id = `req-${i}`;
      if (isLong) long.add(id);
      const answer = await send(r.url, id, isLong ? promptOf(300) : 'short question', `conv-${i}`);
      assert.equal(answer.status, 200);
      assert.equal(answer.pool, 'general', 'the live policy decides: everything to general');
    }
    const summary = async () => json(await fetch(`${r.adminUrl}/admin/shadow`));
    await until(async () => (await summary()).totals.shadowed === 12, 10_000, 'every request shadowed');
    const s = await summary();
    assert.equal(s.state, 'on');
    assert.equal(s.totals.differs, long.size, JSON.stringify(s.totals));
    assert.deepEqual(s.totals.byStep, { model: 0, pool: long.size, replica: 0, admission: 0 });
    assert.deepEqual(s.topDifferences, [{ step: 'pool', live: s.topDifferences[0]?.live, shadow: 'pool rule "long prompts"', count: long.size }]);
    assert.ok(s.costMicros.p50 > 0);

    const samples = json(await fetch(`${r.adminUrl}/admin/shadow/decisions?limit=100`));
    const { decisions } = await samples;
    assert.deepEqual(new Set(decisions.map((d: { requestId: string }) => d.requestId)), long);
    for (const d of decisions) {
      assert.equal(d.live.pool, 'general');
      assert.equal(d.shadow.pool, 'long');
      assert.match(d.text, /^live: general \/ g\d by .+; shadow: long \/ l\d by .*long prompts/);
    }
    const metrics = await (await fetch(`${r.adminUrl}/metrics`)).text();
    assert.match(metrics, new RegExp(`switchyard_shadow_decisions_total\\{result="differs"\\} ${long.size}`));
    assert.match(metrics, new RegExp(`switchyard_shadow_decisions_total\\{result="same"\\} ${12 - long.size}`));
    // Rule names are quoted in the trace: escaped in the label value.
    assert.match(
      metrics,
      new RegExp(`switchyard_shadow_differences_total\\{step="pool",live="[^"]*",shadow="pool rule \\\\"long prompts\\\\""\\} ${long.size}`),
    );
  } finally {
    await r.close();
    await shadow.close();
  }
});

test('the same policy as shadow differs nowhere, prefix affinity included (its own strategies learn from its own decisions)', async () => {
  const strategies = '[prefix-affinity, session-affinity, least-load]';
  const shadow = new Shadow({ builtins: BUILTIN_STRATEGIES, watch: false, sampling: UNBOUNDED });
  assert.equal((await shadow.set(writePolicyDir(livePolicyFiles(strategies), 'same'))).result, 'live');
  const r = await startTestRouter({}, { policy: fixedPolicy(policyFrom(livePolicyFiles(strategies))), shadow });
  try {
    const system = promptOf(200, 'system');
    for (let i = 0; i < 10; i++) await send(r.url, `same-${i}`, `${system} turn ${i}`, `c-${i % 3}`);
    await until(async () => (await json(await fetch(`${r.adminUrl}/admin/shadow`))).totals.shadowed === 10, 10_000, 'every request shadowed');
    const s = await json(await fetch(`${r.adminUrl}/admin/shadow`));
    assert.equal(s.totals.differs, 0, JSON.stringify(await json(await fetch(`${r.adminUrl}/admin/shadow/decisions`))));
  } finally {
    await r.close();
    await shadow.close();
  }
});

/** A strategy whose answer throws when read: that strategy's bad answer, skipped, the shadow decision goes on. */
const explodes: StrategyDefinition = {
  name: 'explodes',
  version: '1.0.0',
  sdk: '^1',
  create: () => ({
    pick: (_request, candidates) => ({
      replica: candidates[0].id,
      get reason(): string {
        throw new Error('the shadow strategy blew up');
      },
    }),
  }),
};
/** A strategy that spins for 3 ms on every pick. */
const slow: StrategyDefinition = {
  name: 'slow',
  version: '1.0.0',
  sdk: '^1',
  create: () => ({
    pick: () => {
      const until = performance.now() + 3;
      while (performance.now() < until);
      return { pass: true, reason: 'slow' };
    },
  }),
};

test('a broken shadow policy is reported, never fatal, and leaves live answers and their latency alone', async () => {
  const shadow = new Shadow({ builtins: [...BUILTIN_STRATEGIES, explodes, slow], watch: false });
  // Invalid files are refused and nothing is shadowed.
  const refused = await shadow.set(
    writePolicyDir({ ...longPromptPolicyFiles(), 'rules.yaml': 'kind: rules\npool_rules: { default_pool: nowhere, rules: [] }\n' }, 'bad'),
  );
  assert.equal(refused.result, 'refused');
  assert.ok(refused.result === 'refused' && refused.errors.some((e) => /nowhere/.test(e)), JSON.stringify(refused));
  assert.equal(shadow.dir, undefined);

  const r = await startTestRouter({}, { policy: fixedPolicy(policyFrom(livePolicyFiles())), shadow });
  try {
    const set = await shadow.set(writePolicyDir(longPromptPolicyFiles('[slow, explodes, least-load]'), 'broken'));
    assert.equal(set.result, 'live');
    // Interleaved, so that the machine's load falls on both alike: even requests unshadowed (share 0), odd ones shadowed.
    const answers: { off: unknown[]; on: unknown[] } = { off: [], on: [] };
    const times: { off: number[]; on: number[] } = { off: [], on: [] };
    for (let i = 0; i < 32; i++) {
      const mode = i % 2 ? 'on' : 'off';
      shadow.sampler.configure({ share: mode === 'on' ? 1 : 0 });
      const started = performance.now();
      answers[mode].push(await send(r.url, `${mode}-${i >> 1}`, i & 2 ? promptOf(300) : 'hello', `conv-${i >> 1}`));
      times[mode].push(performance.now() - started);
    }
    // Each shadow decision spun 3 ms in `slow`: past 50 ms in a second, the rest of that second is skipped (over_budget).
    await until(
      async () => {
        const { totals } = await json(await fetch(`${r.adminUrl}/admin/shadow`));
        return totals.same + totals.differs + totals.failed + totals.over_budget === 16;
      },
      10_000,
      'every shadow decision made or skipped',
    );
    const s = await json(await fetch(`${r.adminUrl}/admin/shadow`));
    // The broken strategy is the shadow's fault alone: skipped as a bad answer, the shadow still decides.
    assert.equal(s.totals.failed, 0, JSON.stringify(s.totals));
    assert.ok(s.totals.same + s.totals.differs >= 1, JSON.stringify(s.totals));
    // The same live answers, request for request.
    assert.deepEqual(answers.on, answers.off);
    // A shadow decision runs after its live decision was committed: a live request waits for at most one (~3 ms here).
    const p50 = (list: number[]) => list.sort((a, b) => a - b)[list.length >> 1];
    assert.ok(p50(times.on) < p50(times.off) * 1.5 + 20, `live p50 ${p50(times.on).toFixed(1)} ms with the shadow vs ${p50(times.off).toFixed(1)} ms without`);
    const metrics = await (await fetch(`${r.adminUrl}/metrics`)).text();
    const faults = /switchyard_shadow_strategy_faults_total\{strategy="explodes",fault="bad_answer"\} (\d+)/.exec(metrics);
    assert.ok(
      faults && Number(faults[1]) === s.totals.same + s.totals.differs,
      metrics
        .split('\n')
        .filter((l) => l.includes('shadow'))
        .join('\n'),
    );
  } finally {
    await r.close();
    await shadow.close();
  }
});

test('PUT and DELETE /admin/shadow set and clear it; bad bodies are 400s that say what to send', async () => {
  const shadow = new Shadow({ builtins: BUILTIN_STRATEGIES, watch: false });
  const r = await startTestRouter({}, { policy: fixedPolicy(policyFrom(livePolicyFiles())), shadow });
  try {
    assert.equal((await json(await fetch(`${r.adminUrl}/admin/shadow`))).state, 'off');
    const put = (body: string) => fetch(`${r.adminUrl}/admin/shadow`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body });
    const bad = await put('{"directory": "x"}');
    assert.equal(bad.status, 400);
    assert.match((await json(bad)).error.message, /\{"dir": "PATH"\}/);
    const missing = await json(await put(JSON.stringify({ dir: '/nonexistent/policies' })));
    assert.equal(missing.result, 'refused');
    const dir = writePolicyDir(longPromptPolicyFiles(), 'admin');
    const ok = await json(await put(JSON.stringify({ dir })));
    assert.equal(ok.result, 'live');
    assert.equal((await json(await fetch(`${r.adminUrl}/admin/shadow`))).state, 'on');
    // The public port has no /admin at all.
    assert.equal((await fetch(`${r.url}/admin/shadow`)).status, 404);
    assert.equal((await json(await fetch(`${r.adminUrl}/admin/shadow`, { method: 'DELETE' }))).state, 'off');
    assert.equal((await fetch(`${r.adminUrl}/admin/shadow/decisions?limit=0`)).status, 400);
  } finally {
    await r.close();
    await shadow.close();
  }
});
