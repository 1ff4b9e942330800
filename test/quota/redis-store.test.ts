// The Redis quota store as routers use it: several stores (routers) share one
// tenant's bucket; Redis killed, slow or back follows on_unavailable.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createEnv } from '../../core/decide/env.ts';
import type { QuotaCost, QuotaLimits, QuotaStoreObserver } from '../../core/decide/quota.ts';
import { RedisQuotaStore, type RedisQuotaSettings } from '../../core/quota/redis-quota-store.ts';
import { QUOTA_WAIT_ROUNDS } from '../../core/quota/wait.ts';
import { chosen, rejected, route, singlePool } from '../helpers/core.ts';
import { until } from '../helpers/router.ts';
import { startRedis, type TestRedis } from '../helpers/redis.ts';

let redis: TestRedis;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.stop();
});

const quiet = { info: () => {}, warn: () => {} };

function settings(overrides: Partial<RedisQuotaSettings> = {}): RedisQuotaSettings {
  return {
    url: redis.url,
    keyPrefix: `t${Math.random().toString(36).slice(2)}:`,
    // Generous: the test machine is shared and loaded; timeouts are tested with a paused Redis.
    timeoutMs: 5000,
    onUnavailable: 'fail_open',
    expectedRouters: 3,
    leaseFraction: 0.1,
    leaseIdleMs: 60_000,
    probeIntervalMs: 50,
    ...overrides,
  };
}

/** What the proxy does: wait (bounded) for the store, then check and take in one synchronous step. */
async function admit(store: RedisQuotaStore, tenant: string, cost: QuotaCost, limits: QuotaLimits): Promise<boolean> {
  for (let round = 0, wait = store.prepare(tenant, cost, limits, Date.now()); wait && round < QUOTA_WAIT_ROUNDS; round++) {
    await wait;
    wait = store.prepare(tenant, cost, limits, Date.now());
  }
  const now = Date.now();
  const verdict = store.check(tenant, cost, limits, now);
  if (verdict.ok) store.take(tenant, cost, limits, now);
  return verdict.ok;
}

function recorder() {
  const events = { failures: [] as string[], up: [] as boolean[], fetches: 0 };
  const observer: QuotaStoreObserver = { failure: (r) => events.failures.push(r), up: (u) => events.up.push(u), fetched: () => events.fetches++ };
  return { events, observer };
}

const ONE = { requests: 1, tokens: 10 };

test('three stores on one Redis admit the tenant’s quota once in total, not three times', async () => {
  const shared = settings();
  const stores = await Promise.all([0, 1, 2].map(() => RedisQuotaStore.open(shared, quiet)));
  try {
    const limits = { requestsPerMinute: 30 };
    const started = Date.now();
    let admitted = 0;
    // Sequential and concurrent arrivals, spread over the three.
    for (let i = 0; i < 45; i++) if (await admit(stores[i % 3], 'acme', ONE, limits)) admitted++;
    const burst = await Promise.all(Array.from({ length: 45 }, (_, i) => admit(stores[i % 3], 'acme', ONE, limits)));
    admitted += burst.filter(Boolean).length;
    const refilled = ((Date.now() - started) / 60_000) * 30;
    assert.ok(admitted >= 30, `at least the quota: ${admitted}`);
    assert.ok(admitted <= 30 + Math.ceil(refilled), `at most the quota plus what refilled in the run (${refilled.toFixed(2)}): ${admitted}`);
    // Another tenant has its own bucket.
    assert.equal(await admit(stores[0], 'other', ONE, limits), true);
  } finally {
    await Promise.all(stores.map((s) => s.close()));
  }
});

test('lease_fraction 0 is one round trip per admission and still exact', async () => {
  const shared = settings({ leaseFraction: 0 });
  const stores = await Promise.all([0, 1].map(() => RedisQuotaStore.open(shared, quiet)));
  const { events, observer } = recorder();
  stores[0].observe(observer);
  try {
    const limits = { requestsPerMinute: 6, tokensPerMinute: 1000 };
    let admitted = 0;
    for (let i = 0; i < 10; i++) if (await admit(stores[i % 2], 'acme', { requests: 1, tokens: 100 }, limits)) admitted++;
    assert.equal(admitted, 6);
    assert.ok(events.fetches >= 3, 'each admission on store 0 fetched');
  } finally {
    await Promise.all(stores.map((s) => s.close()));
  }
});

test('an idle lease goes back to the shared bucket', async () => {
  const shared = settings({ leaseFraction: 0.5, leaseIdleMs: 100 });
  const [a, b] = await Promise.all([0, 1].map(() => RedisQuotaStore.open(shared, quiet)));
  try {
    const limits = { requestsPerMinute: 10 };
    assert.equal(await admit(a, 'acme', ONE, limits), true, 'a leases 5, spends 1');
    let admittedByB = 0;
    for (let i = 0; i < 10; i++) if (await admit(b, 'acme', ONE, limits)) admittedByB++;
    assert.ok(admittedByB >= 5 && admittedByB <= 6, `b gets what a does not hold: ${admittedByB}`);
    // a stops; its lease (4 requests) goes back, and b can spend it.
    await until(async () => admit(b, 'acme', ONE, limits), 10_000, 'the idle lease to come back');
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test('Redis killed mid-run: fail open with this router’s share, logged once, counted; back when Redis is', async () => {
  const warnings: string[] = [];
  const infos: string[] = [];
  const log = { info: (m: string) => infos.push(m), warn: (m: string) => warnings.push(m) };
  const store = await RedisQuotaStore.open(settings({ leaseFraction: 0 }), log);
  const { events, observer } = recorder();
  store.observe(observer);
  try {
    const limits = { requestsPerMinute: 30 };
    assert.equal(await admit(store, 'acme', ONE, limits), true);
    await redis.kill();
    let admitted = 0;
    for (let i = 0; i < 20; i++) if (await admit(store, 'acme', ONE, limits)) admitted++;
    assert.equal(store.up, false);
    assert.equal(admitted, 10, 'fail open: 30 / 3 expected routers');
    assert.equal(warnings.length, 1, 'the outage is logged once');
    assert.match(warnings[0], /failing open/);
    assert.ok(events.failures.length >= 1, 'failures are counted');
    assert.deepEqual(events.up, [true, false]);

    await redis.restart();
    await until(() => store.up, 15_000, 'the store to see Redis again');
    assert.deepEqual(events.up, [true, false, true]);
    assert.ok(infos.some((m) => /answers again/.test(m)));
    assert.equal(await admit(store, 'acme', ONE, limits), true, 'a fresh Redis: shared quota again');
  } finally {
    await store.close();
  }
});

test('Redis too slow (paused past the timeout): fail closed answers unavailable, then recovers', async () => {
  const store = await RedisQuotaStore.open(settings({ leaseFraction: 0, timeoutMs: 50, onUnavailable: 'fail_closed' }), quiet);
  const { events, observer } = recorder();
  store.observe(observer);
  try {
    const limits = { requestsPerMinute: 100 };
    // 50 ms is tight on a loaded test machine: a first call may time out too, and recover.
    await until(() => admit(store, 'acme', ONE, limits), 15_000, 'an admission while Redis answers');
    await redis.command('CLIENT', 'PAUSE', '3000', 'ALL');
    const started = performance.now();
    assert.equal(await admit(store, 'acme', ONE, limits), false);
    const waited = performance.now() - started;
    assert.ok(waited < 2000, `the timeout (50 ms) bounds the wait, not the pause (3000 ms): ${waited.toFixed(0)} ms`);
    assert.deepEqual(store.check('acme', ONE, limits, Date.now()), { ok: false, limit: 'unavailable', retryAfterS: 1 });
    assert.ok(events.failures.includes('timeout'));
    await until(() => admit(store, 'acme', ONE, limits), 20_000, 'recovery after the pause');
    assert.equal(store.up, true);
  } finally {
    await store.close();
  }
});

test('Redis unreachable at start: the store opens down, serves by its policy, and takes Redis when it comes', async () => {
  await redis.kill();
  const store = await RedisQuotaStore.open(settings({ onUnavailable: 'fail_open', expectedRouters: 2 }), quiet);
  try {
    assert.equal(store.up, false);
    const limits = { requestsPerMinute: 4 };
    let admitted = 0;
    for (let i = 0; i < 5; i++) if (await admit(store, 'acme', ONE, limits)) admitted++;
    assert.equal(admitted, 2);
    await redis.restart();
    await until(() => store.up, 15_000, 'the store to reach Redis once it is there');
    assert.equal(await admit(store, 'acme', ONE, limits), true);
  } finally {
    await store.close();
  }
});

test('many concurrent requests of one tenant each get their fetch: none is refused for losing a race', async () => {
  for (const leaseFraction of [0, 0.01]) {
    const store = await RedisQuotaStore.open(settings({ leaseFraction }), quiet);
    try {
      const limits = { requestsPerMinute: 1_000_000, tokensPerMinute: 1_000_000_000 };
      const verdicts = await Promise.all(Array.from({ length: 200 }, () => admit(store, 'acme', { requests: 1, tokens: 300 }, limits)));
      assert.equal(verdicts.filter(Boolean).length, 200, `lease_fraction ${leaseFraction}`);
    } finally {
      await store.close();
    }
  }
});

test('fail closed through decide(): 503 quota_unavailable with Retry-After, and tenants without quotas pass', async () => {
  const store = await RedisQuotaStore.open(settings({ url: 'redis://127.0.0.1:1', onUnavailable: 'fail_closed' }), quiet);
  try {
    const policy = singlePool({
      strategies: ['least-load'],
      tenants:
        'kind: tenants\nanonymous: limited\ntenants:\n  - { id: limited, tier: free, quotas: { requests_per_minute: 100 } }\n' +
        '  - { id: open, tier: pro, api_key_sha256: [f3abf2a6cc4f00987743db5f544ba345b4899ae31f326d8ee9c4816de153c9e0] }\n',
    });
    const env = createEnv({ quota: store });
    const limited = route(policy, { model: 'm' }, undefined, env);
    assert.equal(chosen(limited).status, 503);
    assert.equal(rejected(limited).rejection?.code, 'quota_unavailable');
    assert.equal(rejected(limited).rejection?.type, 'service_unavailable_error');
    assert.equal(rejected(limited).rejection?.retryAfterS, 1);
    assert.equal(chosen(route(policy, { model: 'm', key: 'sk-test' }, undefined, env)).status, 200);
  } finally {
    await store.close();
  }
});
