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
import { freePort, routingUrls, startChild, SWITCHYARD_BIN, waitUntil, type Child } from './process.ts';

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
    if (req.method === 'GET' && req.url === '/metrics')
      return void res.end(
        'vllm:num_requests_running{model_name="tiny"} 0\nvllm:num_requests_waiting{model_name="tiny"} 0\nvllm:kv_cache_usage_perc{model_name="tiny"} 0\n',
      );
    if (req.method === 'GET') return void res.writeHead(404).end();
    req.socket.destroy();
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

function writePolicy(dir: string, droppingUrl: string, revision: number, rulesBroken = false): void {
  mkdirSync(join(dir, 'plugins'), { recursive: true });
  writeFileSync(
    join(dir, 'plugins', 'thrower.mjs'),
    "export default { name: 'thrower', version: '1.0.0', sdk: '^1', create: () => ({ pick() { throw new Error('always'); } }) };\n",
  );
  writeFileSync(
    join(dir, 'settings.yaml'),
    `kind: settings\nplugin_dirs: [plugins]\nscrape_interval_ms: 200\nhealth_interval_ms: 200\ndefault_max_tokens: ${64 + revision}\n`,
  );
  writeFileSync(
    join(dir, 'models.yaml'),
    'kind: models\nmodels:\n  - id: tiny\n    versions: [{ version: v1 }]\n  - id: small\n    versions: [{ version: v2.0.0 }]\n',
  );
  writeFileSync(
    join(dir, 'tenants.yaml'),
    `kind: tenants\nanonymous: anon\ntenants:\n  - { id: anon, tier: free, api_key_sha256: [${sha256(OPEN_KEY)}] }\n  - { id: tight, tier: free, api_key_sha256: [${sha256(QUOTA_KEY)}], quotas: { requests_per_minute: 2 } }\n`,
  );
  writeFileSync(
    join(dir, 'pools.yaml'),
    'kind: pools\npools:\n  - name: general\n    model: tiny\n    version: v1\n    limits: { max_model_len: 1024 }\n    strategies: [thrower, round-robin]\n    replicas:\n' +
      '      - { id: r0, url: "emulate://tiny" }\n      - { id: r1, url: "emulate://tiny" }\n' +
      `      - { id: dropper, url: "${droppingUrl}" }\n` +
      // Another model's pool of the same name: picking one pool must not show both.
      '  - name: general\n    model: small\n    version: v2.0.0\n    limits: { max_model_len: 1024 }\n    strategies: [round-robin]\n    replicas:\n      - { id: s0, url: "emulate://tiny" }\n',
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

async function labelValues(prometheus: string, label: string, metric: string): Promise<string[]> {
  const response = await fetch(`${prometheus}/api/v1/label/${label}/values?match[]=${encodeURIComponent(metric)}`);
  return ((await response.json()) as { data: string[] }).data;
}

/** A variable's value as Grafana puts it into a regex matcher: "All" is its allValue, one value is regex-escaped. */
const asMatcher = (value: string) => (value === '$__all' ? '.*' : value.replace(/[\\^$*+?.()|[\]{}]/g, '\\\\$&'));

/** A panel's query as Grafana sends it for these variable values. */
const asPrometheusQuery = (expr: string, variables: Record<string, string>) => {
  let query = expr.replaceAll('$__rate_interval', '1m');
  for (const [name, value] of Object.entries(variables)) query = query.replaceAll(`$${name}`, asMatcher(value));
  return query;
};

/** label_values(METRIC{...}, LABEL) → [METRIC{...}, LABEL] */
function parseLabelValues(definition: string): [string, string] {
  const m = /^label_values\((.+), *(\w+)\)$/.exec(definition);
  assert.ok(m, `variable query ${definition} is label_values(metric, label)`);
  return [m[1], m[2]];
}

test('every panel of the Grafana dashboard returns data for every value of its variables, from a real Prometheus scraping a router under load', {
  timeout: 120_000,
}, async (t) => {
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
  // The router picks its own ports (a port found free and handed over can be taken meanwhile).
  const router = startChild(process.execPath, [SWITCHYARD_BIN, 'serve', '--policies', policies, '--port', '0', '--admin-port', '0', '--emulator-speed', '20']);
  children.push(router);
  const { url: routerUrl, adminUrl } = await routingUrls(router, 30_000);
  await waitUntil('the router to be ready', async () => ((await fetch(`${routerUrl}/readyz`)).ok ? true : undefined), 30_000, router);

  const promPort = await freePort();
  writeFileSync(
    join(dir, 'prometheus.yml'),
    `global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: switchyard\n    static_configs:\n      - targets: ["${new URL(adminUrl).host}"]\n`,
  );
  const prometheus = startChild('prometheus', [
    `--config.file=${join(dir, 'prometheus.yml')}`,
    `--storage.tsdb.path=${join(dir, 'tsdb')}`,
    `--web.listen-address=127.0.0.1:${promPort}`,
    '--log.level=warn',
  ]);
  children.push(prometheus);
  const promUrl = `http://127.0.0.1:${promPort}`;
  await waitUntil(
    'Prometheus to scrape the router',
    async () => ((await query(promUrl, 'up{job="switchyard"} == 1')).data.result.length > 0 ? true : undefined),
    30_000,
    prometheus,
  );

  // Traffic: ordinary requests (some land on the dropping engine and are
  // retried), a tenant over its quota, and a strategy that always throws.
  const anonymous = new OpenAI({ baseURL: `${routerUrl}/v1`, apiKey: OPEN_KEY, maxRetries: 0, timeout: 20_000 });
  const tight = new OpenAI({ baseURL: `${routerUrl}/v1`, apiKey: QUOTA_KEY, maxRetries: 0, timeout: 20_000 });
  const ask = (client: OpenAI, model = 'tiny') => client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 });
  const answered = await Promise.allSettled([...Array.from({ length: 24 }, () => ask(anonymous)), ...Array.from({ length: 6 }, () => ask(anonymous, 'small'))]);
  const failures = answered.flatMap((r) => (r.status === 'rejected' ? [String(r.reason)] : []));
  assert.ok(failures.length <= 4, `the router answers while one engine drops requests: ${failures.join('; ')}`);
  const limited = await Promise.allSettled(Array.from({ length: 6 }, () => ask(tight)));
  assert.ok(
    limited.some((r) => r.status === 'rejected' && (r.reason as { status?: number }).status === 429),
    'the tight tenant meets its quota',
  );

  // Reloads: a refused one (broken rules) and a good one (the fix).
  writePolicy(policies, droppingUrl, 0, true);
  await waitUntil(
    'a refused reload',
    async () => ((await query(promUrl, 'switchyard_policy_reloads_total{result="refused"} > 0')).data.result.length > 0 ? true : undefined),
    30_000,
    router,
  );
  writePolicy(policies, droppingUrl, 1);
  await waitUntil(
    'a good reload',
    async () => ((await query(promUrl, 'switchyard_policy_reloads_total{result="live"} > 1')).data.result.length > 0 ? true : undefined),
    30_000,
    router,
  );
  await Promise.allSettled([...Array.from({ length: 8 }, () => ask(anonymous)), ...Array.from({ length: 4 }, () => ask(anonymous, 'small'))]);
  // Two more scrapes, so that every rate has two samples after the traffic.
  await new Promise((resolve) => setTimeout(resolve, 2500));

  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
    __inputs: { type: string; pluginId: string }[];
    panels: { title: string; targets: { expr: string }[] }[];
    templating: { list: { name: string; type: string; definition?: string }[] };
  };
  assert.ok(dashboard.panels.length >= 15);
  // Grafana's import dialog asks for a data source only when the file declares it as an input.
  assert.ok(dashboard.__inputs.some((i) => i.type === 'datasource' && i.pluginId === 'prometheus'));

  // Every value each query variable offers (as Grafana would list them), plus "All".
  const variables = dashboard.templating.list.filter((v) => v.type === 'query');
  assert.deepEqual(variables.map((v) => v.name).sort(), ['instance', 'pool']);
  const choices: Record<string, string[]> = {};
  for (const variable of variables) {
    const [metric, label] = parseLabelValues(variable.definition!);
    choices[variable.name] = await labelValues(promUrl, label, metric.replaceAll('$instance', '.*'));
  }
  assert.deepEqual(choices.pool.sort(), ['small@v2.0.0/general', 'tiny@v1/general'], 'the pool variable offers each pool once, by its key');
  assert.equal(choices.instance.length, 1);
  // The pools the request metrics are labelled with are the ones the variable offers.
  const requestPools = await labelValues(promUrl, 'pool', 'switchyard_upstream_ttfb_seconds_bucket');
  assert.deepEqual(requestPools.sort(), choices.pool);

  const empty: string[] = [];
  for (const instance of ['$__all', ...choices.instance]) {
    for (const pool of ['$__all', ...choices.pool]) {
      for (const panel of dashboard.panels) {
        for (const target of panel.targets) {
          const expr = asPrometheusQuery(target.expr, { instance, pool });
          const result = await query(promUrl, expr);
          assert.equal(result.status, 'success', `${panel.title}: ${expr}`);
          const values = result.data.result.map((r) => Number(r.value[1])).filter((v) => !Number.isNaN(v));
          if (values.length === 0) empty.push(`${panel.title} (instance=${instance}, pool=${pool}): ${expr}`);
          // A pool picked shows that pool only.
          if (pool !== '$__all')
            for (const r of result.data.result) if (r.metric.pool !== undefined) assert.equal(r.metric.pool, pool, `${panel.title}: ${expr}`);
        }
      }
    }
  }
  assert.deepEqual(empty, [], 'panels whose query returned no data');
});
