// Hostile plugins against the real router (loopback, emulated engines): a
// plugin that loops forever, leaks or hoards memory, throws, answers a
// replica it was not given, reads the environment or floods the log costs at
// most its time budget per request until it is quarantined; the router keeps
// serving throughout.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CageLimits } from '../../core/plugins/cage/cage.ts';
import { PluginLoader } from '../../core/plugins/loader.ts';
import { PolicyStore } from '../../core/decide/store.ts';
import { OPEN_TENANTS, startTestRouter, TINY_MODELS, tinyPool, until, type TestRouter } from '../helpers/router.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';

const ADMIN = 'hostile-admin-token';
/** Generous: a plugin that held the router would never answer at all. */
const BOUND_MS = 5000;

interface Setup {
  dir: string;
  store: PolicyStore;
  t: TestRouter;
  warnings: string[];
  close(): Promise<void>;
}

/** A router whose pool runs `chain`, with `plugins` (file name → source) in its watched plugin directory. */
async function routerWith(plugins: Record<string, string>, chain: string, limits: Partial<CageLimits> = {}): Promise<Setup> {
  const dir = mkdtempSync(join(tmpdir(), 'sy-hostile-'));
  mkdirSync(join(dir, 'plugins'));
  for (const [name, source] of Object.entries(plugins)) writeFileSync(join(dir, 'plugins', name), source);
  writeFileSync(join(dir, 'models.yaml'), TINY_MODELS);
  writeFileSync(join(dir, 'tenants.yaml'), OPEN_TENANTS);
  writeFileSync(join(dir, 'settings.yaml'), 'kind: settings\nplugin_dirs: [plugins]\ndecision_headers: full\n');
  writeFileSync(join(dir, 'pools.yaml'), tinyPool({ replicas: 2, strategies: chain }));
  const warnings: string[] = [];
  const log = { info() {}, warn: (message: string) => void warnings.push(message) };
  const loader = new PluginLoader({ builtins: BUILTIN_STRATEGIES, log, cage: limits });
  const store = await PolicyStore.open({ dir, seed: 1, debounceMs: 50, log, loader });
  await store.watch();
  const t = await startTestRouter({}, { policy: store, adminToken: ADMIN });
  return {
    dir,
    store,
    t,
    warnings,
    async close() {
      await t.close();
      await store.close();
      await loader.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** One request: its status, how long it took, and the strategy reason the router reports. */
async function send(t: TestRouter): Promise<{ status: number; ms: number; reason: string; headers: Headers }> {
  const started = performance.now();
  const response = await fetch(`${t.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', prompt: 'hello there', max_tokens: 1 }),
    signal: AbortSignal.timeout(BOUND_MS * 4),
  });
  await response.arrayBuffer();
  return { status: response.status, ms: performance.now() - started, reason: response.headers.get('x-switchyard-reason') ?? '', headers: response.headers };
}

async function adminState(
  t: TestRouter,
): Promise<{ policy: { plugins: { name: string; isolation?: { state: string; quarantine?: { reason: string; detail: string } } }[] } }> {
  const response = await fetch(`${t.adminUrl}/admin/state`, { headers: { authorization: `Bearer ${ADMIN}` } });
  assert.equal(response.status, 200);
  return (await response.json()) as never;
}

async function metricsText(t: TestRouter): Promise<string> {
  return (await fetch(`${t.adminUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } })).text();
}

const plugin = (name: string, pick: string, extra = '') => `${extra}
export default {
  name: '${name}', version: '1.0.0', sdk: '^1',
  create() {
    return { pick(request, candidates) { ${pick} } };
  },
};
`;

const LOOPER = plugin('looper', 'for (;;) {}');
const FIXED_LOOPER = plugin('looper', "return { replica: candidates[candidates.length - 1].id, reason: 'fixed' };");

test('a plugin that loops forever costs one time budget, is quarantined and reported, and a fixed file brings it back', async () => {
  const s = await routerWith({ 'looper.mjs': LOOPER }, '[looper, round-robin]');
  try {
    // The router answers throughout, each request within the bound; the looper never decides.
    for (let i = 0; i < 20; i++) {
      const r = await send(s.t);
      assert.equal(r.status, 200);
      assert.ok(r.ms < BOUND_MS, `request ${i} took ${r.ms.toFixed(0)} ms`);
      assert.match(r.reason, /^round-robin: /);
    }
    const health = performance.now();
    assert.equal((await fetch(`${s.t.url}/healthz`)).status, 200);
    assert.ok(performance.now() - health < BOUND_MS, 'the event loop is free while the plugin loops');

    const looper = async () => (await adminState(s.t)).policy.plugins.find((p) => p.name === 'looper')!;
    await until(async () => (await looper()).isolation?.state === 'quarantined', 10_000, 'the looper to be quarantined');
    assert.equal((await looper()).isolation!.quarantine!.reason, 'stuck');
    assert.match(await metricsText(s.t), /switchyard_plugin_quarantined\{plugin="looper",reason="stuck"\} 1/);
    assert.match(await metricsText(s.t), /switchyard_strategy_faults_total\{strategy="looper",fault="timeout"\} [1-9]/);
    assert.ok(
      s.warnings.some((w) => /plugin .*looper\.mjs quarantined \(stuck\)/.test(w)),
      s.warnings.join('\n'),
    );
    const quarantined = await send(s.t);
    assert.equal(quarantined.status, 200);
    assert.match(quarantined.reason, /^round-robin: /);

    // Fixing the file un-quarantines it: a new worker for the new code.
    writeFileSync(join(s.dir, 'plugins', 'looper.mjs.tmp'), FIXED_LOOPER);
    renameSync(join(s.dir, 'plugins', 'looper.mjs.tmp'), join(s.dir, 'plugins', 'looper.mjs'));
    await until(async () => (await send(s.t)).reason === 'looper: fixed', 15_000, 'the fixed plugin to pick');
    assert.equal((await looper()).isolation!.state, 'running');
    assert.match(await metricsText(s.t), /switchyard_plugin_quarantined\{plugin="looper",reason="none"\} 0/);
  } finally {
    await s.close();
  }
});

// 100 KB a pick (a leak that stays well inside its time budget), against a small limit so the test is short;
// and a hoarder keeping 20 MB a pick against the default 64 MB budget, which V8's own heap cap used to turn
// into an abort of the whole process (test/plugins/hoarder.test.ts runs it against a router in a child process).
for (const [kind, leak, reason, limits, served] of [
  ['objects on its heap', 'kept.push(new Array(12_800).fill(Math.random()));', /memory/, { heapMb: 8 }, 20],
  ['buffers off its heap', 'kept.push(Buffer.alloc(100 * 1024, 1));', /memory/, { heapMb: 8 }, 20],
  ['20 MB a pick on its heap (a hoarder)', 'kept.push(new Array(2_621_440).fill(kept.length + 0.5));', /memory/, { callTimeoutMs: 2000 }, 1],
] as const) {
  test(`a plugin that leaks ${kind} is stopped at its limit, not the router; it is quarantined`, async () => {
    const leaker = plugin('leaker', `${leak} return { replica: candidates[0].id, reason: 'leaking ' + kept.length };`, 'const kept = [];');
    const s = await routerWith({ 'leaker.mjs': leaker }, '[leaker, round-robin]', limits);
    try {
      const rssBefore = process.memoryUsage().rss;
      const quarantined = () => s.store.status().plugins[0].isolation?.state === 'quarantined';
      let leaked = 0;
      const deadline = Date.now() + 90_000;
      while (!quarantined() && Date.now() < deadline) {
        const r = await send(s.t);
        assert.equal(r.status, 200);
        assert.ok(r.ms < BOUND_MS, `a request took ${r.ms.toFixed(0)} ms`);
        if (r.reason.startsWith('leaker: leaking')) leaked++;
      }
      await until(quarantined, 15_000, 'the leaker to be quarantined');
      const isolation = s.store.status().plugins[0].isolation!;
      assert.match(isolation.quarantine!.reason, reason, isolation.quarantine!.detail);
      assert.ok(leaked >= served, `it served picks until its memory ran out (${leaked})`);
      assert.match((await send(s.t)).reason, /^round-robin: /);
      // The worker's memory went with it: the router holds none of the leak.
      await until(() => process.memoryUsage().rss - rssBefore < 128 * 1024 * 1024, 10_000, 'the leaked memory to be returned');
    } finally {
      await s.close();
    }
  });
}

test('a plugin that throws, or answers a replica it was not given, is skipped on each request; the router serves on', async () => {
  const thrower = plugin('thrower', "throw new Error('boom\\r\\nx-injected: 1');");
  const liar = plugin('liar', "return { replica: 'not-a-candidate', reason: 'trust me' };");
  // A generous time budget: on a loaded machine a cold worker may miss 20 ms, and this test counts faults exactly.
  const s = await routerWith({ 'thrower.mjs': thrower, 'liar.mjs': liar }, '[thrower, liar, round-robin]', { callTimeoutMs: 2000 });
  try {
    for (let i = 0; i < 10; i++) {
      const r = await send(s.t);
      assert.equal(r.status, 200);
      assert.ok(r.ms < BOUND_MS);
      assert.match(r.reason, /^round-robin: /);
      assert.equal(r.headers.get('x-injected'), null);
    }
    const metrics = await metricsText(s.t);
    assert.match(metrics, /switchyard_strategy_faults_total\{strategy="thrower",fault="threw"\} 10/);
    assert.match(metrics, /switchyard_strategy_faults_total\{strategy="liar",fault="bad_answer"\} 10/);
    for (const p of s.store.status().plugins) assert.equal(p.isolation!.state, 'running', `${p.name}: throwing is not a reason to quarantine`);
  } finally {
    await s.close();
  }
});

test("a plugin sees none of the router's environment, and its reason reaches clients capped and header-safe", async () => {
  const snoop = plugin(
    'snoop',
    "return { replica: candidates[0].id, reason: 'env ' + Object.keys(process.env).length + ' token ' + (process.env.SWITCHYARD_ADMIN_TOKEN ?? 'none') + ' path ' + (process.env.PATH ?? 'none') + '\\r\\nx-injected: 1\\u0000' + 'A'.repeat(5000) };",
  );
  process.env.SWITCHYARD_ADMIN_TOKEN = 'router-secret';
  // A generous time budget: on a loaded machine a pick may miss 20 ms, and the reason read must be the plugin's.
  const s = await routerWith({ 'snoop.mjs': snoop }, '[snoop, round-robin]', { callTimeoutMs: 2000 });
  try {
    const r = await until(async () => (await send(s.t)).reason.startsWith('snoop: '), 10_000, 'the snoop plugin to pick').then(() => send(s.t));
    assert.equal(r.status, 200);
    assert.match(r.reason, /^snoop: env 0 token none path none +x-injected: 1 A+$/);
    assert.ok(!r.reason.includes('router-secret'));
    assert.ok(r.reason.length <= 220, `reason capped (${r.reason.length} chars)`);
    assert.equal(r.headers.get('x-injected'), null);
  } finally {
    delete process.env.SWITCHYARD_ADMIN_TOKEN;
    await s.close();
  }
});

test('a plugin that floods the router with output is quarantined', async () => {
  const chatty = plugin('chatty', "for (let i = 0; i < 5000; i++) console.log('spam', i); return { pass: true, reason: 'said a lot' };");
  const s = await routerWith({ 'chatty.mjs': chatty }, '[chatty, round-robin]', { callTimeoutMs: 5000 });
  try {
    for (let i = 0; i < 5 && s.store.status().plugins[0].isolation?.state !== 'quarantined'; i++) {
      const r = await send(s.t);
      assert.equal(r.status, 200);
      assert.match(r.reason, /^round-robin: /);
    }
    await until(() => s.store.status().plugins[0].isolation?.state === 'quarantined', 10_000, 'the chatty plugin to be quarantined');
    assert.equal(s.store.status().plugins[0].isolation!.quarantine!.reason, 'flooding');
    assert.ok(
      s.warnings.some((w) => /chatty\.mjs quarantined \(flooding\)/.test(w)),
      s.warnings.join('\n'),
    );
  } finally {
    await s.close();
  }
});

/** Whether process `pid` is gone (a zombie waiting for its parent to reap it counts as gone: it runs nothing). */
function processGone(pid: number): boolean {
  try {
    return /^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}

// A plugin runs in a process of its own: whatever ends that process (an abort, a signal, bytes written over the
// cage's own pipe) ends only the plugin. Tested here, in the router's process: a test runner that survives is a
// router that survived.
for (const [what, pick, extra] of [
  // A native crash, as a fault in an addon would end it (process.abort() does nothing in a worker thread).
  ['crashes (SIGSEGV)', "process.kill(process.pid, 'SIGSEGV');", ''],
  ['kills its own process', "process.kill(process.pid, 'SIGKILL');", ''],
  [
    'writes over the cage’s pipe',
    "writeSync(1, Buffer.alloc(64, 255)); return { replica: candidates[0].id, reason: 'wrote' };",
    "import { writeSync } from 'node:fs';",
  ],
] as const) {
  test(`a plugin that ${what} is quarantined as crashed; its process is gone and the router serves on`, async () => {
    const s = await routerWith({ 'crasher.mjs': plugin('crasher', pick, extra) }, '[crasher, round-robin]');
    try {
      const isolation = () => s.store.status().plugins[0].isolation!;
      const pid = isolation().pid!;
      assert.equal(isolation().isolation, 'process');
      assert.ok(pid > 0 && pid !== process.pid, `the plugin has a process of its own (${pid})`);
      for (let i = 0; i < 5; i++) {
        const r = await send(s.t);
        assert.equal(r.status, 200);
        assert.ok(r.ms < BOUND_MS, `request ${i} took ${r.ms.toFixed(0)} ms`);
      }
      await until(() => isolation().state === 'quarantined', 15_000, 'the crasher to be quarantined');
      assert.equal(isolation().quarantine!.reason, 'crashed', isolation().quarantine!.detail);
      assert.match(isolation().quarantine!.detail, /^its process /);
      assert.match((await send(s.t)).reason, /^round-robin: /);
      await until(() => processGone(pid), 10_000, 'the plugin process to be gone');
    } finally {
      await s.close();
    }
  });
}
