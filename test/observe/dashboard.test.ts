// The Grafana dashboard in deploy/grafana is checked against a real
// Prometheus scraping a real router: every panel's query must return data
// once the router has seen the traffic the panel is about (requests, quota
// rejections, retries, strategy faults, reloads, replica signals).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { freePort, startChild, SWITCHYARD_BIN, waitUntil, type Child } from './process.ts';

const DASHBOARD = new URL('../../deploy/grafana/switchyard-dashboard.json', import.meta.url).pathname;
const QUOTA_KEY = 'sk-dashboard-tight';
const OPEN_KEY = 'sk-dashboard-open';
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

function requirePrometheus(): void {
  try {
    execFileSync('prometheus', ['--version'], { stdio: 'ignore' });
  } catch {
    assert.fail('prometheus is not installed: .ci/run installs it (apt-get install -y prometheus)');
  }
}

/** An engine that passes its health checks but drops every inference request before answering. */
function droppingEngine(): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/health') return void res.end('ok');
    if (req.method === 'GET' && req.url === '/metrics') return void res.end('vllm:num_requests_running{model_name="tiny"} 0\nvllm:num_requests_waiting{model_name="tiny"} 0\nvllm:kv_cache_usage_perc{model_name="tiny"} 0\n');
    if (req.method === 'GET') return void res.writeHead(404).end();
    req.socket.destroy();
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

function writePolicy(dir: string, droppingUrl: string, revision: number, rulesBroken = false): void {
  mkdirSync(join(dir, 'plugins'), { recursive: true });
  writeFileSync(join(dir, 'plugins', 'thrower.mjs'), "export default { name: 'thrower', version: '1.0.0', sdk: '^1', create: () => ({ pick() { throw new Error('always'); } }) };\n");
  writeFileSync(join(dir, 'settings.yaml'), `kind: settings\nplugin_dirs: [plugins]\nscrape_interval_ms: 200\nhealth_interval_ms: 200\ndefault_max_tokens: ${64 + revision}\n`);
  writeFileSync(join(dir, 'models.yaml'), 'kind: models\nmodels:\n  - id: tiny\n    versions: [{ version: v1 }]\n');
  writeFileSync(
    join(dir, 'tenants.yaml'),
    `kind: tenants\nanonymous: anon\ntenants:\n  - { id: anon, tier: free, api_key_sha256: [${sha256(OPEN_KEY)}] }\n  - { id: tight, tier: free, api_key_sha256: [${sha256(QUOTA_KEY)}], quotas: { requests_per_minute: 2 } }\n`,
  );
  writeFileSync(
    join(dir, 'pools.yaml'),
    'kind: pools\npools:\n  - name: general\n    model: tiny\n    version: v1\n    limits: { max_model_len: 1024 }\n    strategies: [thrower, round-robin]\n    replicas:\n' +
      '      - { id: r0, url: "emulate://tiny" }\n      - { id: r1, url: "emulate://tiny" }\n' +
      `      - { id: dropper, url: "${droppingUrl}" }\n`,
  );
  if (rulesBroken) writeFileSync(join(dir, 'rules.yaml'), 'kind: rules\npool_rules: [ {');
  else rmSync(join(dir, 'rules.yaml'), { force: true });
}

interface PromResult {
  status: string;
  data: { result: { metric: Record<string, string>; value: [number, string] }[] };
}

async function query(prometheus: string, expr: string): Promise<PromResult> {
  const response = await fetch(`${prometheus}/api/v1/query?query=${encodeURIComponent(expr)}`);
  return (await response.json()) as PromResult;
}

/** Grafana's variables as a dashboard user with "All" selected would send them. */
const asPrometheusQuery = (expr: string) => expr.replaceAll('$__rate_interval', '1m').replaceAll('$pool', '.*');

test('every panel of the Grafana dashboard returns data from a real Prometheus scraping a router under load', { timeout: 120_000 }, async (t) => {
  requirePrometheus();
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-dashboard-'));
  const children: Child[] = [];
  const dropper = await droppingEngine();
  t.after(async () => {
    for (const child of children) await child.stop();
    dropper.close();
    dropper.closeAllConnections();
    rmSync(dir, { recursive: true, force: true });
  });

  const policies = join(dir, 'policies');
  const droppingUrl = `http://127.0.0.1:${(dropper.address() as { port: number }).port}`;
  writePolicy(policies, droppingUrl, 0);
  const routerPort = await freePort();
  const router = startChild(process.execPath, [SWITCHYARD_BIN, 'serve', '--policies', policies, '--port', String(routerPort), '--admin-port', '0', '--emulator-speed', '20', '--log-level', 'warn']);
  children.push(router);
  const routerUrl = `http://127.0.0.1:${routerPort}`;
  await waitUntil('the router to be ready', async () => ((await fetch(`${routerUrl}/readyz`)).ok ? true : undefined), 30_000, router);

  const promPort = await freePort();
  writeFileSync(
    join(dir, 'prometheus.yml'),
    `global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: switchyard\n    static_configs:\n      - targets: ["127.0.0.1:${routerPort}"]\n`,
  );
  const prometheus = startChild('prometheus', [
    `--config.file=${join(dir, 'prometheus.yml')}`,
    `--storage.tsdb.path=${join(dir, 'tsdb')}`,
    `--web.listen-address=127.0.0.1:${promPort}`,
    '--log.level=warn',
  ]);
  children.push(prometheus);
  const promUrl = `http://127.0.0.1:${promPort}`;
  await waitUntil('Prometheus to scrape the router', async () => ((await query(promUrl, 'up{job="switchyard"} == 1')).data.result.length > 0 ? true : undefined), 30_000, prometheus);

  // Traffic: ordinary requests (some land on the dropping engine and are
  // retried), a tenant over its quota, and a strategy that always throws.
  const anonymous = new OpenAI({ baseURL: `${routerUrl}/v1`, apiKey: OPEN_KEY, maxRetries: 0, timeout: 20_000 });
  const tight = new OpenAI({ baseURL: `${routerUrl}/v1`, apiKey: QUOTA_KEY, maxRetries: 0, timeout: 20_000 });
  const ask = (client: OpenAI) => client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 });
  const answered = await Promise.allSettled(Array.from({ length: 24 }, () => ask(anonymous)));
  const failures = answered.flatMap((r) => (r.status === 'rejected' ? [String(r.reason)] : []));
  assert.ok(failures.length <= 4, `the router answers while one engine drops requests: ${failures.join('; ')}`);
  const limited = await Promise.allSettled(Array.from({ length: 6 }, () => ask(tight)));
  assert.ok(limited.some((r) => r.status === 'rejected' && (r.reason as { status?: number }).status === 429), 'the tight tenant meets its quota');

  // Reloads: a refused one (broken rules) and a good one (the fix).
  writePolicy(policies, droppingUrl, 0, true);
  await waitUntil('a refused reload', async () => ((await query(promUrl, 'switchyard_policy_reloads_total{result=~"error|refused"} > 0')).data.result.length > 0 ? true : undefined), 30_000, router);
  writePolicy(policies, droppingUrl, 1);
  await waitUntil('a good reload', async () => ((await query(promUrl, 'switchyard_policy_reloads_total{result=~"ok|live"} > 0')).data.result.length > 0 ? true : undefined), 30_000, router);
  await Promise.allSettled(Array.from({ length: 8 }, () => ask(anonymous)));
  // Two more scrapes, so that every rate has two samples after the traffic.
  await new Promise((resolve) => setTimeout(resolve, 2500));

  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: { title: string; targets: { expr: string }[] }[] };
  assert.ok(dashboard.panels.length >= 15);
  const empty: string[] = [];
  for (const panel of dashboard.panels) {
    for (const target of panel.targets) {
      const result = await query(promUrl, asPrometheusQuery(target.expr));
      assert.equal(result.status, 'success', `${panel.title}: ${target.expr}`);
      const values = result.data.result.map((r) => Number(r.value[1])).filter((v) => !Number.isNaN(v));
      if (values.length === 0) empty.push(`${panel.title}: ${target.expr}`);
    }
  }
  assert.deepEqual(empty, [], 'panels whose query returned no data');
});
