// OpenAI's x-ratelimit-* headers for a tenant's quota (docs/serving.md), so a
// client can pace itself: limit, remaining and reset, for requests and tokens.

import type { QuotaStore } from '../decide/quota.ts';
import type { TenantQuotas } from '../decide/generation.ts';

/** One request's worth: the buckets hold a minute and refill continuously. */
const REFILL_MS = 60_000;

/**
 * The headers as a flat [name, value, ...] list (how the proxy writes them).
 * None for a tenant without quotas or with a shadow quota (never enforced,
 * so nothing a client should pace on). A store that cannot say what is left
 * here (the shared Redis store) gives the limits alone.
 */
export function rateLimitHeaders(store: QuotaStore, tenant: string, quotas: TenantQuotas, now: number): string[] {
  if (!sendsRateLimits(quotas)) return [];
  const left = store.remaining?.(tenant, quotas, now);
  const headers: string[] = [];
  const add = (kind: 'requests' | 'tokens', limit: number | undefined, remaining: number | undefined) => {
    if (limit === undefined) return;
    headers.push(`x-ratelimit-limit-${kind}`, String(limit));
    if (remaining === undefined) return;
    headers.push(`x-ratelimit-remaining-${kind}`, String(remaining), `x-ratelimit-reset-${kind}`, resetText(((limit - remaining) / limit) * REFILL_MS));
  };
  add('requests', quotas.requestsPerMinute, left?.requests);
  add('tokens', quotas.tokensPerMinute, left?.tokens);
  return headers;
}

/** Whether a tenant's answers carry the headers: an enforced quota (the caller need not read the clock otherwise). */
export function sendsRateLimits(quotas: TenantQuotas): boolean {
  return !quotas.shadow && (quotas.requestsPerMinute !== undefined || quotas.tokensPerMinute !== undefined);
}

/** Time until the bucket is full again, as OpenAI writes it: "0s", "250ms", "12s", "1m0s". */
export function resetText(ms: number): string {
  if (!(ms > 0)) return '0s';
  if (ms < 1000) return `${Math.ceil(ms)}ms`;
  const s = Math.ceil(ms / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${s % 60}s`;
}
