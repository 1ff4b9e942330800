// Tenant quotas shared by every router through one Redis (docs/quotas.md).
//
// The bucket lives in Redis (token-bucket.lua.ts, atomic). Each router leases
// small chunks of a tenant's bucket and admits from its lease, so check() and
// take() stay synchronous and most requests never wait on Redis; prepare()
// fetches a lease when the local one cannot cover a request (awaited before
// decide(), bounded by timeout_ms), and a lease running low is refilled in the
// background. lease_fraction 0 leases exactly each request's cost: one round
// trip per admission.
//
// Redis down, slow (past timeout_ms) or answering nonsense is the policy's
// choice: fail open with this router's share of each quota (limit /
// expected_routers, in a local bucket) or fail closed (503). Logged once per
// outage, counted, and probed until Redis answers again.
import { Redis } from 'ioredis';
import type { Logger } from '../../sdk/index.ts';
import type { QuotaStoreSettings } from '../policy/compiled.ts';
import {
  hasQuota,
  MemoryQuotaStore,
  secondsUntil,
  type QuotaCost,
  type QuotaLimits,
  type QuotaStore,
  type QuotaStoreObserver,
  type QuotaVerdict,
} from '../decide/quota.ts';
import { TOKEN_BUCKET_LUA } from './token-bucket.lua.ts';

/** The settings' quota_store block (core/policy/compile/settings.ts), with the URL chosen. */
export interface RedisQuotaSettings extends Omit<QuotaStoreSettings, 'redisUrl'> {
  readonly url: string;
  /** While Redis is out, how often to try it (default 500 ms). */
  readonly probeIntervalMs?: number;
}

/** A bucket untouched this long is full again, so its key may go. */
const KEY_TTL_MS = 120_000;
/** Usage settlements of a tenant are summed this long and sent as one script call (with leases). */
const SETTLE_BATCH_MS = 50;

interface Lease {
  /** Held locally, spendable without asking Redis. */
  requests: number;
  tokens: number;
  limits: QuotaLimits;
  /** The last cost seen: the size a background refill makes room for. */
  lastCost: QuotaCost;
  /** Script calls in flight; a request that one of them will cover waits on it instead of asking again. */
  fetches: Fetch[];
  /** Redis said no: answer "over quota" locally until then (ms, the caller's clock). */
  deniedUntil: number;
  denied: QuotaVerdict;
  /** Date.now() of the last use, for giving idle leases back. */
  usedAt: number;
}

/** One lease fetch: what it asks for, and how much of that waiting requests have counted on. */
interface Fetch {
  readonly wantRequests: number;
  readonly wantTokens: number;
  claimedRequests: number;
  claimedTokens: number;
  promise: Promise<void>;
}

type BucketReply = { fits: boolean; grantedRequests: number; grantedTokens: number; requestsLeft: number; tokensLeft: number };

type RedisWithBucket = Redis & {
  tokenBucket(key: string, ...args: (string | number)[]): Promise<unknown>;
};

export class RedisQuotaStore implements QuotaStore {
  readonly settings: RedisQuotaSettings;
  private readonly redis: RedisWithBucket;
  private readonly log: Logger;
  private readonly leases = new Map<string, Lease>();
  /** Fail open: this router's share of each quota. */
  private readonly local = new MemoryQuotaStore();
  private readonly shares = new WeakMap<QuotaLimits, QuotaLimits>();
  private observer: QuotaStoreObserver | undefined;
  private isUp = true;
  private downSince = 0;
  private probe: NodeJS.Timeout | undefined;
  private readonly sweep: NodeJS.Timeout;
  private closed = false;
  /** Settlements not yet sent to Redis, by tenant: > 0 gives back, < 0 takes. */
  private readonly unsettled = new Map<string, { tokens: number; limits: QuotaLimits }>();
  private settleTimer: NodeJS.Timeout | undefined;

  private constructor(settings: RedisQuotaSettings, log: Logger) {
    this.settings = settings;
    this.log = log;
    this.redis = new Redis(settings.url, {
      lazyConnect: true,
      // Fail now rather than queue: a queued admission is a stalled request.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: settings.timeoutMs,
      connectTimeout: Math.max(1000, settings.timeoutMs),
      // Reconnect forever, backing off to a second: recovery is automatic.
      retryStrategy: (times) => Math.min(times * 50, 1000),
    }) as RedisWithBucket;
    this.redis.defineCommand('tokenBucket', { numberOfKeys: 1, lua: TOKEN_BUCKET_LUA });
    // Without a listener ioredis prints every reconnect error; the outage is logged once below.
    this.redis.on('error', () => {});
    this.sweep = setInterval(() => this.returnIdleLeases(), Math.max(100, settings.leaseIdleMs / 2));
    this.sweep.unref();
  }

  /** Connects (bounded); an unreachable Redis is an outage from the start, not an error. */
  static async open(settings: RedisQuotaSettings, log: Logger): Promise<RedisQuotaStore> {
    const store = new RedisQuotaStore(settings, log);
    try {
      await store.redis.connect();
      // Loads the script now: the first admission should not pay for it.
      await store.redis.script('LOAD', TOKEN_BUCKET_LUA);
      log.info('quota store: Redis connected', { redis: redactedUrl(settings.url) });
    } catch (error) {
      store.markDown('error', error);
    }
    return store;
  }

  observe(observer: QuotaStoreObserver): void {
    this.observer = observer;
    observer.up(this.isUp);
  }

  get up(): boolean {
    return this.isUp;
  }

  check(tenant: string, cost: QuotaCost, limits: QuotaLimits, now: number): QuotaVerdict {
    if (!hasQuota(limits)) return FITS;
    const lease = this.leases.get(tenant);
    if (lease && covers(lease, cost, limits)) return FITS;
    if (!this.isUp) return this.fallbackCheck(tenant, cost, limits, now);
    if (lease && now < lease.deniedUntil) return lease.denied;
    // Not prepared, or a concurrent request spent the lease first: a short retry.
    return { ok: false, limit: limits.requestsPerMinute !== undefined ? 'requests' : 'tokens', retryAfterS: 1 };
  }

  take(tenant: string, cost: QuotaCost, limits: QuotaLimits, now: number): void {
    if (!hasQuota(limits)) return;
    const lease = this.leases.get(tenant);
    if (lease && covers(lease, cost, limits)) {
      lease.requests -= cost.requests;
      lease.tokens -= cost.tokens;
      lease.usedAt = Date.now();
      if (this.isUp && lease.fetches.length === 0 && this.settings.leaseFraction > 0 && this.runningLow(lease, limits)) {
        this.fetch(tenant, lease, lease.lastCost, limits, now, false);
      }
      return;
    }
    if (!this.isUp && this.settings.onUnavailable === 'fail_open') this.local.take(tenant, cost, this.share(limits), now);
  }

  /**
   * Usage settlement (docs/quotas.md). With leases, the tenant's lease takes
   * it first (a refund up to lease_fraction of the limit, a charge as far as
   * the lease holds); the rest goes to the shared bucket, summed per tenant over a
   * short batch. Without leases (lease_fraction 0), each one goes at once.
   */
  settle(tenant: string, tokens: number, limits: QuotaLimits, now: number): void {
    const tpm = limits.tokensPerMinute;
    if (tpm === undefined || !Number.isFinite(tokens) || tokens === 0 || this.closed) return;
    if (!this.isUp) {
      if (this.settings.onUnavailable === 'fail_open') this.local.settle(tenant, tokens, this.share(limits), now);
      return;
    }
    const lease = this.leases.get(tenant);
    if (lease && this.settings.leaseFraction > 0) {
      if (tokens < 0) {
        const taken = Math.min(Math.max(0, lease.tokens), -tokens);
        lease.tokens -= taken;
        tokens += taken;
      } else {
        // At most a lease's worth stays here: the rest is the other routers' to use too.
        const room = Math.max(0, tpm * this.settings.leaseFraction - lease.tokens);
        const kept = Math.min(room, tokens);
        lease.tokens += kept;
        tokens -= kept;
        lease.deniedUntil = 0;
      }
      if (tokens === 0) return;
    }
    const entry = this.unsettled.get(tenant);
    if (entry) {
      entry.tokens += tokens;
      entry.limits = limits;
    } else this.unsettled.set(tenant, { tokens, limits });
    if (!this.settleTimer) {
      this.settleTimer = setTimeout(() => void this.sendSettlements(), this.settings.leaseFraction > 0 ? SETTLE_BATCH_MS : 0);
      this.settleTimer.unref();
    }
  }

  private async sendSettlements(): Promise<void> {
    this.settleTimer = undefined;
    const batch = [...this.unsettled];
    this.unsettled.clear();
    await Promise.allSettled(
      batch.map(([tenant, { tokens, limits }]) =>
        tokens === 0
          ? undefined
          : this.redis.tokenBucket(
              this.key(tenant),
              tokens > 0 ? 'give' : 'charge',
              limits.requestsPerMinute ?? -1,
              limits.tokensPerMinute ?? -1,
              0,
              Math.abs(tokens),
              0,
              0,
              '',
              KEY_TTL_MS,
            ),
      ),
    );
    // A settlement lost to an outage costs at most what the bucket refills within a minute anyway.
  }

  prepare(tenant: string, cost: QuotaCost, limits: QuotaLimits, now: number): Promise<void> | undefined {
    if (!hasQuota(limits) || !this.isUp || this.closed) return undefined;
    let lease = this.leases.get(tenant);
    if (!lease) {
      lease = { requests: 0, tokens: 0, limits, lastCost: cost, fetches: [], deniedUntil: 0, denied: FITS, usedAt: Date.now() };
      this.leases.set(tenant, lease);
    }
    lease.lastCost = cost;
    lease.limits = limits;
    if (covers(lease, cost, limits)) return undefined;
    if (now < lease.deniedUntil) return undefined;
    // Join a fetch that asks for more than the requests already counting on it need.
    const needR = limits.requestsPerMinute === undefined ? 0 : cost.requests;
    const needT = limits.tokensPerMinute === undefined ? 0 : cost.tokens;
    for (const f of lease.fetches) {
      if (f.wantRequests - f.claimedRequests >= needR && f.wantTokens - f.claimedTokens >= needT) {
        f.claimedRequests += needR;
        f.claimedTokens += needT;
        return f.promise;
      }
    }
    return this.fetch(tenant, lease, cost, limits, now, true).promise;
  }

  /** Gives every lease back (bounded by the timeout) and disconnects. */
  async close(): Promise<void> {
    if (this.settleTimer) {
      clearTimeout(this.settleTimer);
      if (this.isUp) await this.sendSettlements();
    }
    this.closed = true;
    clearInterval(this.sweep);
    if (this.probe) clearInterval(this.probe);
    if (this.isUp) await Promise.allSettled([...this.leases].map(([tenant, lease]) => this.giveBack(tenant, lease)));
    this.redis.disconnect();
  }

  /**
   * One atomic script call: all of `cost` (the request it is for) or nothing,
   * and up to a lease more when there is that much. `claimed`: the request
   * that starts it counts on it.
   */
  private fetch(tenant: string, lease: Lease, cost: QuotaCost, limits: QuotaLimits, now: number, claimed: boolean): Fetch {
    const rpm = limits.requestsPerMinute;
    const tpm = limits.tokensPerMinute;
    const fraction = this.settings.leaseFraction;
    const needR = rpm === undefined ? 0 : cost.requests;
    const needT = tpm === undefined ? 0 : cost.tokens;
    const record: Fetch = {
      wantRequests: Math.max(needR, (rpm ?? 0) * fraction),
      wantTokens: Math.max(needT, (tpm ?? 0) * fraction),
      claimedRequests: claimed ? needR : 0,
      claimedTokens: claimed ? needT : 0,
      promise: Promise.resolve(),
    };
    lease.fetches.push(record);
    record.promise = this.call(tenant, lease, record, cost, limits, now);
    return record;
  }

  private async call(tenant: string, lease: Lease, record: Fetch, cost: QuotaCost, limits: QuotaLimits, now: number): Promise<void> {
    const started = performance.now();
    const rpm = limits.requestsPerMinute;
    const tpm = limits.tokensPerMinute;
    try {
      const reply = parseReply(
        await this.redis.tokenBucket(
          this.key(tenant),
          'take',
          rpm ?? -1,
          tpm ?? -1,
          rpm === undefined ? 0 : cost.requests,
          tpm === undefined ? 0 : cost.tokens,
          record.wantRequests,
          record.wantTokens,
          '',
          KEY_TTL_MS,
        ),
      );
      if (!reply) {
        this.markDown('garbage', new Error('the token bucket script answered something that is not a bucket'));
        return;
      }
      if (reply.fits) {
        lease.requests += reply.grantedRequests;
        lease.tokens += reply.grantedTokens;
        lease.deniedUntil = 0;
      } else {
        this.deny(lease, cost, limits, reply, now);
      }
    } catch (error) {
      this.markDown(/timed out/i.test((error as Error)?.message ?? '') ? 'timeout' : 'error', error);
    } finally {
      lease.fetches.splice(lease.fetches.indexOf(record), 1);
      this.observer?.fetched((performance.now() - started) / 1000);
    }
  }

  /** Remembers a denial until the shared bucket can have refilled what it lacked for this request. */
  private deny(lease: Lease, cost: QuotaCost, limits: QuotaLimits, reply: BucketReply, now: number): void {
    const rpm = limits.requestsPerMinute;
    const tpm = limits.tokensPerMinute;
    let deficit: number;
    let perMinute: number;
    let limit: 'requests' | 'tokens';
    if (rpm !== undefined && reply.requestsLeft < cost.requests) {
      deficit = cost.requests - reply.requestsLeft;
      perMinute = rpm;
      limit = 'requests';
    } else {
      // A request larger than a whole minute's tokens can never fit (as in memory).
      deficit = Math.min(cost.tokens, tpm ?? 0) - reply.tokensLeft;
      perMinute = tpm ?? 1;
      limit = 'tokens';
    }
    deficit = Math.max(deficit, 1e-9);
    lease.denied = { ok: false, limit, retryAfterS: secondsUntil(deficit, perMinute) };
    lease.deniedUntil = now + (deficit / perMinute) * 60_000;
  }

  private runningLow(lease: Lease, limits: QuotaLimits): boolean {
    const half = this.settings.leaseFraction / 2;
    const rpm = limits.requestsPerMinute;
    const tpm = limits.tokensPerMinute;
    return (
      (rpm !== undefined && lease.requests < Math.max(lease.lastCost.requests, rpm * half)) ||
      (tpm !== undefined && lease.tokens < Math.max(lease.lastCost.tokens, tpm * half))
    );
  }

  private fallbackCheck(tenant: string, cost: QuotaCost, limits: QuotaLimits, now: number): QuotaVerdict {
    if (this.settings.onUnavailable === 'fail_closed') return UNAVAILABLE;
    return this.local.check(tenant, cost, this.share(limits), now);
  }

  private share(limits: QuotaLimits): QuotaLimits {
    let share = this.shares.get(limits);
    if (!share) {
      const n = this.settings.expectedRouters;
      share = {
        requestsPerMinute: limits.requestsPerMinute === undefined ? undefined : limits.requestsPerMinute / n,
        tokensPerMinute: limits.tokensPerMinute === undefined ? undefined : limits.tokensPerMinute / n,
      };
      this.shares.set(limits, share);
    }
    return share;
  }

  private returnIdleLeases(): void {
    if (!this.isUp || this.closed) return;
    const idleBefore = Date.now() - this.settings.leaseIdleMs;
    for (const [tenant, lease] of this.leases) {
      if (lease.usedAt > idleBefore || lease.fetches.length > 0) continue;
      this.leases.delete(tenant);
      if (lease.requests > 0 || lease.tokens > 0) void this.giveBack(tenant, lease);
    }
  }

  private async giveBack(tenant: string, lease: Lease): Promise<void> {
    const { requestsPerMinute: rpm, tokensPerMinute: tpm } = lease.limits;
    const requests = lease.requests;
    const tokens = lease.tokens;
    lease.requests = 0;
    lease.tokens = 0;
    if (requests <= 0 && tokens <= 0) return;
    try {
      await this.redis.tokenBucket(this.key(tenant), 'give', rpm ?? -1, tpm ?? -1, Math.max(0, requests), Math.max(0, tokens), 0, 0, '', KEY_TTL_MS);
    } catch {
      // Lost: the bucket refills within a minute anyway.
    }
  }

  private key(tenant: string): string {
    return this.settings.keyPrefix + tenant;
  }

  private markDown(reason: 'timeout' | 'error' | 'garbage', error: unknown): void {
    this.observer?.failure(reason);
    if (!this.isUp || this.closed) return;
    this.isUp = false;
    this.downSince = Date.now();
    this.observer?.up(false);
    const policy =
      this.settings.onUnavailable === 'fail_open'
        ? `failing open: each router admits 1/${this.settings.expectedRouters} of every quota on its own`
        : 'failing closed: requests of tenants with quotas get 503';
    this.log.warn(`quota store: Redis unavailable (${reason}), ${policy} until it answers again`, {
      redis: redactedUrl(this.settings.url),
      error: String((error as Error)?.message ?? error).slice(0, 200),
    });
    this.probe = setInterval(() => void this.tryRecover(), this.settings.probeIntervalMs ?? 500);
    this.probe.unref();
  }

  private async tryRecover(): Promise<void> {
    if (this.isUp || this.closed) return;
    try {
      if ((await this.redis.ping()) !== 'PONG') return;
    } catch {
      return;
    }
    if (this.isUp || this.closed) return;
    clearInterval(this.probe);
    this.probe = undefined;
    this.isUp = true;
    // Denials and fail-open spending were local guesses; the shared bucket is the truth again.
    for (const lease of this.leases.values()) lease.deniedUntil = 0;
    this.observer?.up(true);
    this.log.info(`quota store: Redis answers again after ${Date.now() - this.downSince} ms; quotas are shared again`, {
      redis: redactedUrl(this.settings.url),
    });
  }
}

const FITS: QuotaVerdict = Object.freeze({ ok: true });
const UNAVAILABLE: QuotaVerdict = Object.freeze({ ok: false, limit: 'unavailable', retryAfterS: 1 });

function covers(lease: Lease, cost: QuotaCost, limits: QuotaLimits): boolean {
  return (limits.requestsPerMinute === undefined || lease.requests >= cost.requests) && (limits.tokensPerMinute === undefined || lease.tokens >= cost.tokens);
}

/** The script's reply, checked: anything else is garbage, never trusted. */
export function parseReply(reply: unknown): BucketReply | undefined {
  if (!Array.isArray(reply) || reply.length !== 5) return undefined;
  const [fits, ...rest] = reply;
  const numbers = rest.map((x) => (typeof x === 'string' && x.length <= 32 ? Number(x) : NaN));
  if ((fits !== 0 && fits !== 1) || numbers.some((n) => !Number.isFinite(n) || n < 0)) return undefined;
  return { fits: fits === 1, grantedRequests: numbers[0], grantedTokens: numbers[1], requestsLeft: numbers[2], tokensLeft: numbers[3] };
}

/** The URL without its password, for logs. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparseable URL)';
  }
}
