// Tenant quotas behind a small store interface. The in-memory store is the
// embedded default (one router); core/quota/redis-quota-store.ts shares a
// tenant's bucket between routers through Redis (docs/quotas.md). Both answer
// check() and take() synchronously from local state, so decide() never waits
// on the network; a shared store fills that state in prepare(), awaited
// before decide().

export interface QuotaLimits {
  readonly requestsPerMinute?: number;
  readonly tokensPerMinute?: number;
}

export interface QuotaCost {
  readonly requests: number;
  readonly tokens: number;
}

/** `unavailable`: the shared store cannot answer and its policy is to fail closed. */
export type QuotaVerdict = { readonly ok: true } | { readonly ok: false; readonly limit: 'requests' | 'tokens' | 'unavailable'; readonly retryAfterS: number };

/** The verdict of every request that fits: one object, not one a request. */
const FITS: QuotaVerdict = Object.freeze({ ok: true });

export interface QuotaStore {
  /** Would `cost` fit now? Takes nothing. */
  check(tenant: string, cost: QuotaCost, limits: QuotaLimits, now: number): QuotaVerdict;
  /** Takes `cost` (called once the request is admitted). */
  take(tenant: string, cost: QuotaCost, limits: QuotaLimits, now: number): void;
  /**
   * Settles a token charge once the engine's usage is known: `tokens` > 0
   * gives back what the estimate took beyond the use, < 0 takes what the use
   * exceeded it by. The bucket never goes below empty nor above full.
   */
  settle?(tenant: string, tokens: number, limits: QuotaLimits, now: number): void;
  /**
   * A shared store: a promise while this router does not yet hold enough of
   * the tenant's quota to answer check() (it is being fetched, bounded by the
   * store's timeout); undefined when check() can answer now. Callers await
   * and ask again, then decide in the same synchronous step.
   */
  prepare?(tenant: string, cost: QuotaCost, limits: QuotaLimits, now: number): Promise<void> | undefined;
  /** A shared store reports its health to the router's metrics. */
  observe?(observer: QuotaStoreObserver): void;
  /** What is left of the tenant's buckets now, for the x-ratelimit-remaining-* headers (undefined: unknown here). */
  remaining?(tenant: string, limits: QuotaLimits, now: number): QuotaCost | undefined;
}

/** What a shared store reports: each failure by reason, going down or up, each fetch's time. */
export interface QuotaStoreObserver {
  failure(reason: 'timeout' | 'error' | 'garbage'): void;
  up(isUp: boolean): void;
  fetched(seconds: number): void;
}

export const hasQuota = (limits: QuotaLimits): boolean => limits.requestsPerMinute !== undefined || limits.tokensPerMinute !== undefined;

interface Buckets {
  requests: number;
  tokens: number;
  at: number;
}

/**
 * Token buckets per tenant: each holds a minute's worth and refills
 * continuously, so a tenant may burst up to its per-minute limit.
 */
export class MemoryQuotaStore implements QuotaStore {
  private readonly buckets = new Map<string, Buckets>();

  private refill(tenant: string, limits: QuotaLimits, now: number): Buckets {
    let bucket = this.buckets.get(tenant);
    if (!bucket) {
      bucket = { requests: limits.requestsPerMinute ?? Infinity, tokens: limits.tokensPerMinute ?? Infinity, at: now };
      this.buckets.set(tenant, bucket);
    }
    const elapsedMinutes = Math.max(0, now - bucket.at) / 60_000;
    bucket.requests = Math.min(limits.requestsPerMinute ?? Infinity, bucket.requests + elapsedMinutes * (limits.requestsPerMinute ?? Infinity));
    bucket.tokens = Math.min(limits.tokensPerMinute ?? Infinity, bucket.tokens + elapsedMinutes * (limits.tokensPerMinute ?? Infinity));
    bucket.at = now;
    return bucket;
  }

  check(tenant: string, cost: QuotaCost, limits: QuotaLimits, now: number): QuotaVerdict {
    if (limits.requestsPerMinute === undefined && limits.tokensPerMinute === undefined) return FITS;
    const bucket = this.refill(tenant, limits, now);
    if (limits.requestsPerMinute !== undefined && bucket.requests < cost.requests) {
      return { ok: false, limit: 'requests', retryAfterS: secondsUntil(cost.requests - bucket.requests, limits.requestsPerMinute) };
    }
    if (limits.tokensPerMinute !== undefined && bucket.tokens < cost.tokens) {
      // A request larger than a whole minute's tokens can never fit.
      const deficit = Math.min(cost.tokens, limits.tokensPerMinute) - bucket.tokens;
      return { ok: false, limit: 'tokens', retryAfterS: secondsUntil(deficit, limits.tokensPerMinute) };
    }
    return FITS;
  }

  take(tenant: string, cost: QuotaCost, limits: QuotaLimits, now: number): void {
    if (limits.requestsPerMinute === undefined && limits.tokensPerMinute === undefined) return;
    const bucket = this.refill(tenant, limits, now);
    // Never below empty: a shadow quota takes what it admits over its limit.
    bucket.requests = Math.max(0, bucket.requests - cost.requests);
    bucket.tokens = Math.max(0, bucket.tokens - cost.tokens);
  }

  settle(tenant: string, tokens: number, limits: QuotaLimits, now: number): void {
    if (limits.tokensPerMinute === undefined || !Number.isFinite(tokens) || tokens === 0) return;
    const bucket = this.refill(tenant, limits, now);
    bucket.tokens = Math.min(limits.tokensPerMinute, Math.max(0, bucket.tokens + tokens));
  }

  remaining(tenant: string, limits: QuotaLimits, now: number): QuotaCost | undefined {
    if (!hasQuota(limits)) return undefined;
    const bucket = this.refill(tenant, limits, now);
    return { requests: Math.max(0, Math.floor(bucket.requests)), tokens: Math.max(0, Math.floor(bucket.tokens)) };
  }
}

/** Whole seconds (at least 1) until `deficit` refills at `perMinute`. */
export function secondsUntil(deficit: number, perMinute: number): number {
  return Math.max(1, Math.ceil((deficit / perMinute) * 60));
}
