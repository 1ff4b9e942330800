// Settlement across routers: three real routers share one real Redis; a
// tenant whose requests ask for max_tokens 4096 but use 20 tokens is admitted
// again and again whichever router it reaches, because each router gives the
// unused estimate back to the shared bucket; and the bucket ends where the
// use (not the estimates) puts it.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import OpenAI from 'openai';
import { createEnv } from '../../core/decide/env.ts';
import { RedisQuotaStore } from '../../core/quota/redis-quota-store.ts';
import { fixedPolicy } from '../../core/serve/fixed-policy.ts';
import { startRouter, type Router } from '../../core/serve/server.ts';
import { policyFrom } from '../helpers/core.ts';
import { until } from '../helpers/router.ts';
import { startRedis, type TestRedis } from '../helpers/redis.ts';
import { UsageEngine } from '../helpers/usage-engine.ts';

const LIMIT = 30_000;
const sha = (key: string) => createHash('sha256').update(key).digest('hex');
let redis: TestRedis;
const engines = [new UsageEngine('e0'), new UsageEngine('e1')];
const routers: { router: Router; store: RedisQuotaStore; client: OpenAI }[] = [];

before(async () => {
  redis = await startRedis();
  const urls = await Promise.all(engines.map((e) => e.start()));
  const files = {
    'models.yaml': 'kind: models\nmodels:\n  - id: tiny\n    versions: [{ version: v1 }]\n',
    'pools.yaml': `kind: pools\npools:\n  - name: general\n    model: tiny\n    version: v1\n    limits: { max_model_len: 8192 }\n    strategies: [power-of-two]\n    replicas:\n${urls.map((u, i) => `      - { id: e${i}, url: "${u}" }`).join('\n')}\n`,
    'tenants.yaml': `kind: tenants\ntenants:\n  - { id: thrifty, tier: free, quotas: { tokens_per_minute: ${LIMIT} }, api_key_sha256: [${sha('sk-thrifty')}] }\n`,
  };
  for (let i = 0; i < 3; i++) {
    // Router 0 and 1 lease (the default), router 2 makes a round trip per admission.
    const store = await RedisQuotaStore.open(
      {
        url: redis.url,
        keyPrefix: 'switchyard:quota:',
        timeoutMs: 5000,
        onUnavailable: 'fail_open',
        expectedRouters: 3,
        leaseFraction: i < 2 ? 0.01 : 0,
        leaseIdleMs: 60_000,
        probeIntervalMs: 50,
      },
      { info: () => {}, warn: () => {} },
    );
    const router = await startRouter({
      policy: fixedPolicy(policyFrom(files, `r${i}`)),
      port: 0,
      logger: false,
      scrapeIntervalMs: 50,
      healthIntervalMs: 50,
      admin: { port: 0 },
      env: createEnv({ seed: i, quota: store }),
    });
    routers.push({ router, store, client: new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'sk-thrifty', maxRetries: 0, timeout: 10_000 }) });
  }
  await until(() => routers.every((r) => r.router.fleet.list().every((s) => s.health === 'ready')), 15_000, 'engines ready');
});

after(async () => {
  for (const r of routers) {
    await r.router.close(1000);
    await r.store.close();
  }
  await Promise.all(engines.map((e) => e.stop()));
  await redis.stop();
});

/** Tokens left in the shared bucket, as Redis holds them. */
async function tokensLeft(): Promise<number> {
  const reply = await redis.command('HGET', 'switchyard:quota:thrifty', 't');
  const m = /^\$\d+\r\n([^\r]+)\r\n/.exec(reply);
  return m ? Number(m[1]) : LIMIT;
}

test('settlement across three routers sharing Redis: 20 requests asking 4096 tokens, using 20, all admitted (7 would empty the bucket unsettled)', async () => {
  const statuses: number[] = [];
  for (let i = 0; i < 20; i++) {
    const { client } = routers[i % 3];
    try {
      const answer = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'Short answer please.' }], max_tokens: 4096 });
      assert.equal(answer.usage?.completion_tokens, 20);
      statuses.push(200);
    } catch (error) {
      statuses.push((error as { status: number }).status);
    }
    // The refund reaches the shared bucket within moments (batched per tenant): wait for it before the next router asks.
    await until(async () => (await tokensLeft()) > LIMIT - 3 * 4200, 5000, 'the refund in Redis');
  }
  assert.deepEqual(statuses, Array(20).fill(200));
  // Settled, the shared bucket holds the limit less what was used (about 30 a request) and what
  // the two leasing routers hold (up to one request's estimate each: docs/quotas.md, "How exact it is").
  // The last refund is on its way (batched for 50 ms): wait for the bucket to get there.
  await until(
    async () => (await tokensLeft()) > LIMIT - 20 * 40 - 2 * 4200,
    5000,
    `the bucket back to its limit less the use and two leases (it holds ${await tokensLeft()})`,
  );
});
