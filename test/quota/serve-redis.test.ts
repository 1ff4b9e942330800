// `switchyard serve` picks its quota store: --redis wins over
// SWITCHYARD_REDIS_URL, which wins over settings' quota_store.redis_url.
// Real CLI processes, one real Redis; a wrong URL in settings would show as
// switchyard_quota_store_up 0.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { routingUrls, startChild, SWITCHYARD_BIN, waitUntil, type Child } from '../observe/process.ts';
import { startRedis, type TestRedis } from '../helpers/redis.ts';

const UNREACHABLE = 'redis://127.0.0.1:1';
let redis: TestRedis;
let dir: string;
const children: Child[] = [];

before(async () => {
  redis = await startRedis();
  dir = mkdtempSync(join(tmpdir(), 'switchyard-serve-redis-'));
  writeFileSync(join(dir, 'models.yaml'), 'kind: models\nmodels:\n  - id: tiny\n    versions: [{ version: v1 }]\n');
  writeFileSync(
    join(dir, 'pools.yaml'),
    'kind: pools\npools:\n  - name: general\n    model: tiny\n    version: v1\n    limits: { max_model_len: 1024 }\n    replicas:\n      - { id: r0, url: "emulate://tiny" }\n',
  );
  writeFileSync(join(dir, 'tenants.yaml'), 'kind: tenants\nanonymous: anon\ntenants:\n  - { id: anon, tier: free, quotas: { requests_per_minute: 100 } }\n');
  writeFileSync(join(dir, 'settings.yaml'), `kind: settings\nquota_store: { redis_url: "${UNREACHABLE}", timeout_ms: 5000 }\n`);
});

after(async () => {
  await Promise.all(children.map((c) => c.stop()));
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Starts a router; answers its public URL and its admin listener's (where /metrics is). */
async function serve(args: string[], env: Record<string, string>): Promise<{ url: string; admin: string }> {
  const child = startChild(
    process.execPath,
    [SWITCHYARD_BIN, 'serve', '--policies', dir, '--port', '0', '--admin-port', '0', '--emulator-speed', '20', ...args],
    {
      env,
    },
  );
  children.push(child);
  const { url, adminUrl } = await routingUrls(child);
  await waitUntil('the router to answer /readyz', async () => ((await fetch(`${url}/readyz`)).ok ? true : undefined), 60_000, child);
  return { url, admin: adminUrl };
}

async function quotaStoreUp(router: { admin: string }): Promise<string | undefined> {
  const text = await (await fetch(`${router.admin}/metrics`)).text();
  return /^switchyard_quota_store_up (\d)$/m.exec(text)?.[1];
}

test('--redis beats SWITCHYARD_REDIS_URL, which beats settings', async () => {
  const [flag, environment, settings] = await Promise.all([
    serve(['--redis', redis.url], { SWITCHYARD_REDIS_URL: UNREACHABLE }),
    serve([], { SWITCHYARD_REDIS_URL: redis.url }),
    serve([], { SWITCHYARD_REDIS_URL: '' }),
  ]);
  assert.equal(await quotaStoreUp(flag), '1', 'the flag');
  assert.equal(await quotaStoreUp(environment), '1', 'the environment over settings');
  assert.equal(await quotaStoreUp(settings), '0', 'settings alone: the unreachable URL is used, and the router serves anyway');
  // Serving anyway, by the fail-open default.
  const response = await fetch(`${settings.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
  });
  assert.equal(response.status, 200);
});

test('a --redis that is not a redis:// URL is a usage error', () => {
  const result = spawnSync(process.execPath, [SWITCHYARD_BIN, 'serve', '--policies', dir, '--redis', 'http://example.com'], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.notEqual(result.status, 0);
  assert.match(result.stderr, /--redis must be a redis:\/\/ or rediss:\/\/ URL/);
});
