// Tenant quotas behind a small store interface: in memory for one router
// now; a shared store (Redis, say) can implement the same two calls later.

export interface QuotaLimits {
  readonly requestsPerMinute?: number;
  readonly tokensPerMinute?: number;
}

export interface QuotaCost {
  readonly requests: number;
  readonly tokens: number;
}

export type QuotaVerdict = { readonly ok: true } | { readonly ok: false; readonly limit: 'requests' | 'tokens'; readonly retryAfterS: number };

/** The verdict of every request that fits: one object, not one a request. */
const FITS: QuotaVerdict = Object.freeze({ ok: true });

export interface QuotaStore {
  /** Would `cost` fit now? Takes nothing. */
  check(tenant: string, cost: QuotaCost, limits: QuotaLimits, now: number): QuotaVerdict;
  /** Takes `cost` (called once the request is admitted). */
  take(tenant: string, cost: QuotaCost, limits: QuotaLimits, now: number): void;
}

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
    bucket.requests -= cost.requests;
    bucket.tokens -= cost.tokens;
  }
}

function secondsUntil(deficit: number, perMinute: number): number {
  return Math.max(1, Math.ceil((deficit / perMinute) * 60));
}
