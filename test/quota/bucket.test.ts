// The Lua token bucket against the in-memory one (core/decide/quota.ts): the
// same sequence of requests at the same times gets the same verdicts and the
// same Retry-After from both. And garbage under a key never breaks the script.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { MemoryQuotaStore, secondsUntil, type QuotaLimits } from '../../core/decide/quota.ts';
import { parseReply } from '../../core/quota/redis-quota-store.ts';
import { TOKEN_BUCKET_LUA } from '../../core/quota/token-bucket.lua.ts';
import { startRedis, type TestRedis } from '../helpers/redis.ts';

let server: TestRedis;
let redis: Redis;

before(async () => {
  server = await startRedis();
  redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
});
after(async () => {
  redis.disconnect();
  await server.stop();
});

/** One take of exactly `cost` at `now`, as a router with lease_fraction 0 does. */
async function luaTake(key: string, limits: QuotaLimits, requests: number, tokens: number, now: number) {
  const raw = await redis.eval(
    TOKEN_BUCKET_LUA,
    1,
    key,
    'take',
    limits.requestsPerMinute ?? -1,
    limits.tokensPerMinute ?? -1,
    requests,
    tokens,
    0,
    0,
    now,
    120_000,
  );
  const reply = parseReply(raw);
  assert.ok(reply, `a bucket reply, not ${JSON.stringify(raw)}`);
  return reply;
}

const limitsArb = fc
  .record({ rpm: fc.option(fc.integer({ min: 1, max: 40 }), { nil: undefined }), tpm: fc.option(fc.integer({ min: 100, max: 20_000 }), { nil: undefined }) })
  .filter((l) => l.rpm !== undefined || l.tpm !== undefined);
const stepsArb = fc.array(fc.record({ dtMs: fc.integer({ min: 0, max: 20_000 }), tokens: fc.integer({ min: 1, max: 6000 }) }), { minLength: 1, maxLength: 40 });

test('the Lua bucket gives the in-memory bucket’s verdicts and Retry-After, step for step', async () => {
  let run = 0;
  await fc.assert(
    fc.asyncProperty(limitsArb, stepsArb, async ({ rpm, tpm }, steps) => {
      const limits: QuotaLimits = { requestsPerMinute: rpm, tokensPerMinute: tpm };
      const key = `diff:${run++}`;
      const memory = new MemoryQuotaStore();
      let now = 1_700_000_000_000;
      for (const step of steps) {
        now += step.dtMs;
        const cost = { requests: 1, tokens: step.tokens };
        const expected = memory.check('t', cost, limits, now);
        if (expected.ok) memory.take('t', cost, limits, now);
        const got = await luaTake(key, limits, cost.requests, cost.tokens, now);
        assert.equal(got.fits, expected.ok, `step at +${step.dtMs} ms, ${step.tokens} tokens`);
        if (!expected.ok) {
          const retry =
            rpm !== undefined && got.requestsLeft < 1
              ? secondsUntil(1 - got.requestsLeft, rpm)
              : secondsUntil(Math.min(cost.tokens, tpm!) - got.tokensLeft, tpm!);
          assert.equal(retry, expected.retryAfterS);
        }
      }
    }),
    { numRuns: 60 },
  );
});

test('a take grants at least the need and up to the lease asked for, never more than is left', async () => {
  const limits = { requestsPerMinute: 10, tokensPerMinute: 1000 };
  const now = 1_700_000_000_000;
  const first = await luaTake('lease', limits, 1, 100, now);
  assert.deepEqual([first.grantedRequests, first.grantedTokens], [1, 100]);
  const raw = await redis.eval(TOKEN_BUCKET_LUA, 1, 'lease', 'take', 10, 1000, 1, 100, 4, 500, now, 120_000);
  const lease = parseReply(raw)!;
  assert.deepEqual([lease.fits, lease.grantedRequests, lease.grantedTokens], [true, 4, 500]);
  const rest = parseReply(await redis.eval(TOKEN_BUCKET_LUA, 1, 'lease', 'take', 10, 1000, 1, 100, 50, 5000, now, 120_000))!;
  assert.deepEqual([rest.grantedRequests, rest.grantedTokens, rest.requestsLeft, rest.tokensLeft], [5, 400, 0, 0], 'all that is left, no more');
  const none = await luaTake('lease', limits, 1, 1, now);
  assert.equal(none.fits, false);
  // Giving back refills, capped at the limit.
  await redis.eval(TOKEN_BUCKET_LUA, 1, 'lease', 'give', 10, 1000, 3, 300, 0, 0, now, 120_000);
  const back = await luaTake('lease', limits, 3, 300, now);
  assert.equal(back.fits, true);
  await redis.eval(TOKEN_BUCKET_LUA, 1, 'lease', 'give', 10, 1000, 99, 99_999, 0, 0, now, 120_000);
  const capped = await luaTake('lease', limits, 1, 1, now);
  assert.deepEqual([capped.requestsLeft, capped.tokensLeft], [9, 999]);
});

test('garbage under a key reads as a full or clamped bucket, never an error', async () => {
  const limits = { requestsPerMinute: 5, tokensPerMinute: 500 };
  const now = 1_700_000_000_000;
  const plant: [string, string[]][] = [
    ['g:string', ['SET', 'g:string', 'not a bucket']],
    ['g:list', ['RPUSH', 'g:list', 'a', 'b']],
    ['g:text', ['HSET', 'g:text', 'r', 'abc', 't', '', 'at', 'yesterday']],
    ['g:nan', ['HSET', 'g:nan', 'r', 'nan', 't', 'inf', 'at', 'nan']],
    ['g:negative', ['HSET', 'g:negative', 'r', '-7', 't', '-1e308', 'at', '-5']],
    ['g:huge', ['HSET', 'g:huge', 'r', '1e308', 't', '99999999', 'at', '1e300']],
    ['g:future', ['HSET', 'g:future', 'r', '0', 't', '0', 'at', String(now + 3_600_000)]],
  ];
  for (const [key, command] of plant) {
    await server.command(...command);
    const reply = await luaTake(key, limits, 1, 50, now);
    assert.ok(reply.requestsLeft >= 0 && reply.requestsLeft <= 5, `${key}: requests left in [0, 5], got ${reply.requestsLeft}`);
    assert.ok(reply.tokensLeft >= 0 && reply.tokensLeft <= 500, `${key}: tokens left in [0, 500], got ${reply.tokensLeft}`);
    // The key is a sane bucket afterwards: it refills from here.
    const later = await luaTake(key, limits, 1, 50, now + 60_000);
    assert.equal(later.fits, true, `${key} refills`);
  }
  // A timestamp planted in the future must not freeze the bucket.
  const frozen = await luaTake('g:future', limits, 1, 50, now + 120_000);
  assert.equal(frozen.fits, true);
});

test('the script reply is checked: anything but a bucket is refused', () => {
  assert.equal(parseReply(null), undefined);
  assert.equal(parseReply([1, '1', '2', '3']), undefined);
  assert.equal(parseReply([2, '1', '2', '3', '4']), undefined);
  assert.equal(parseReply([1, 'x', '2', '3', '4']), undefined);
  assert.equal(parseReply([1, '-1', '2', '3', '4']), undefined);
  assert.equal(parseReply([1, 'Infinity', '2', '3', '4']), undefined);
  assert.deepEqual(parseReply([0, '0', '0', '1.5', '20']), { fits: false, grantedRequests: 0, grantedTokens: 0, requestsLeft: 1.5, tokensLeft: 20 });
});
