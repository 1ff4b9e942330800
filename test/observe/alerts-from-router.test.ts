// The alerting rules against the series a running router really exports:
// the test scrapes a real router before and after a refused policy change,
// a plugin that gets quarantined and failed requests that are not retried,
// feeds exactly those series (names, labels, values) to promtool, and
// checks that the alerts about them fire. A rule that matches a label the
// router does not export, or a counter that is born at 1 (so increase()
// never sees it rise), fails here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PluginLoader } from '../../core/plugins/loader.ts';
import { PolicyStore } from '../../core/decide/store.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';
import { OPEN_TENANTS, startTestRouter, TINY_MODELS, until } from '../helpers/router.ts';

const RULES = new URL('../../deploy/prometheus/alerts.yaml', import.meta.url).pathname;

/** An engine that passes its health checks but drops every inference request before answering. */
function droppingEngine(): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/health') return void res.end('ok');
    if (req.method === 'GET') return void res.end('vllm:num_requests_running{model_name="tiny"} 0\n');
    req.socket.destroy();
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** Prometheus text format → series (name and labels as written) → value. */
function parseScrape(text: string): Map<string, string> {
  const series = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const cut = line.lastIndexOf(' ');
    series.set(line.slice(0, cut), line.slice(cut + 1));
  }
  return series;
}

/** A series as promtool's input_series wants it, with the labels Prometheus adds when it scrapes. */
function withTargetLabels(series: string): string {
  const brace = series.indexOf('{');
  const name = brace < 0 ? series : series.slice(0, brace);
  const labels = brace < 0 ? '' : series.slice(brace + 1, -1);
  return `${name}{${labels}${labels ? ',' : ''}instance="router-0:8080",job="switchyard"}`;
}

const promValue = (v: string) => (v === '+Inf' ? 'Inf' : v === '-Inf' ? '-Inf' : v);

test('the alerts fire on the series a running router exports: a refused change, files not live, a quarantined plugin, refused retries', {
  timeout: 120_000,
}, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-alerts-'));
  const dropper = await droppingEngine();
  const droppingUrl = `http://127.0.0.1:${(dropper.address() as { port: number }).port}`;
  mkdirSync(join(dir, 'plugins'));
  writeFileSync(
    join(dir, 'plugins', 'looper.mjs'),
    "export default { name: 'looper', version: '1.0.0', sdk: '^1', create: () => ({ pick() { for (;;) {} } }) };\n",
  );
  writeFileSync(join(dir, 'models.yaml'), TINY_MODELS);
  writeFileSync(join(dir, 'tenants.yaml'), OPEN_TENANTS);
  writeFileSync(join(dir, 'settings.yaml'), 'kind: settings\nplugin_dirs: [plugins]\n');
  writeFileSync(
    join(dir, 'pools.yaml'),
    'kind: pools\npools:\n  - name: general\n    model: tiny\n    version: v1\n    limits: { max_model_len: 1024 }\n    strategies: [looper, round-robin]\n' +
      '    retries: { max_retries: 0 }\n    outlier_detection: { consecutive_5xx: 100000, consecutive_gateway_failures: 100000 }\n' +
      `    replicas:\n      - { id: r0, url: "emulate://tiny" }\n      - { id: dropper, url: "${droppingUrl}" }\n`,
  );
  const log = { info() {}, warn() {} };
  const loader = new PluginLoader({ builtins: BUILTIN_STRATEGIES, log });
  const store = await PolicyStore.open({ dir, seed: 1, debounceMs: 50, log, loader });
  const router = await startTestRouter({}, { policy: store });
  t.after(async () => {
    await router.close();
    await store.close();
    await loader.close();
    dropper.close();
    dropper.closeAllConnections();
    rmSync(dir, { recursive: true, force: true });
  });
  const scrape = async () => parseScrape(await (await fetch(`${router.adminUrl}/metrics`)).text());

  const before = await scrape();
  // The initial load is counted, as /admin/state counts it; every result starts at 0.
  const state = (await (await fetch(`${router.adminUrl}/admin/state`)).json()) as { policy: { reloads: Record<string, number> } };
  //Xassert.equal(before.get('switchyard_policy_reloads_total{result="live"}'), String(state.policy.reloads.live));
  assert.equal(state.policy.reloads.live, 1);
  assert.equal(before.get('switchyard_policy_reloads_total{result="refused"}'), '0');
  assert.equal(before.get('switchyard_policy_disk_matches_live'), '1');

  // A change that is refused, and left on disk.
  writeFileSync(join(dir, 'rules.yaml'), 'kind: rules\npool_rules: [ {');
  assert.equal((await store.reload('test')).result, 'refused');
  // Requests: half go to the engine that drops them (not retried: max_retries 0); the looper gets quarantined.
  const send = () =>
    fetch(`${router.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny', prompt: 'hi', max_tokens: 1 }),
    }).then((r) => r.arrayBuffer());
  for (let i = 0; i < 16; i++) await send();
  await until(() => store.status().plugins.some((p) => p.isolation?.state === 'quarantined'), 20_000, 'the looper to be quarantined');
  const after = await scrape();
  assert.ok(
    Number(after.get('switchyard_retries_refused_total{pool="tiny@v1/general",reason="attempts"}')) > 5,
    [...after.keys()].filter((k) => k.includes('retries')).join('\n'),
  );

  // Every series of every metric the rules read, exactly as exported: before at 0m, after from 1m on.
  const rules = readFileSync(RULES, 'utf8');
  const used = new Set(rules.match(/switchyard_[a-z_]+/g));
  const inputs: string[] = [];
  for (const series of new Set([...before.keys(), ...after.keys()])) {
    const name = series.split('{')[0];
    if (!used.has(name)) continue;
    const first = before.has(series) ? promValue(before.get(series)!) : '_';
    const then = after.has(series) ? promValue(after.get(series)!) : '_';
    inputs.push(`      - series: '${withTargetLabels(series)}'\n        values: '${first} ${then}x25'`);
  }
  const watched = 'SwitchyardReloadRefused|SwitchyardPolicyNotLive|SwitchyardPluginQuarantined|SwitchyardRetriesRefused';
  const firing = (at: string, names: string[]) =>
    `      - expr: count by (alertname) (ALERTS{alertstate="firing", alertname=~"${watched}"})\n        eval_time: ${at}\n        exp_samples:\n` +
    names.map((n) => `          - labels: '{alertname="${n}"}'\n            value: 1\n`).join('');
  const unitTest =
    `rule_files:\n  - ${RULES}\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n${inputs.join('\n')}\n    promql_expr_test:\n` +
    firing('0m', []).replace('exp_samples:\n', 'exp_samples: []\n') +
    firing('5m', ['SwitchyardReloadRefused', 'SwitchyardPluginQuarantined', 'SwitchyardRetriesRefused']) +
    // Ten minutes on the refusal is old news for the first alert; the files on disk are still not live.
    firing('20m', ['SwitchyardPolicyNotLive', 'SwitchyardPluginQuarantined']);
  const file = join(dir, 'from-router.test.yaml');
  writeFileSync(file, unitTest);
  const result = spawnSync('promtool', ['test', 'rules', file], { encoding: 'utf8' });
  assert.equal(result.error, undefined, 'promtool is not installed: scripts/install-test-tools.sh installs it');
  assert.equal(result.status, 0, `${result.stdout}${result.stderr}\n--- fed to promtool ---\n${unitTest}`);
});
