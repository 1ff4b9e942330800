// Before decide(): lets a shared quota store fetch the tenant's share it
// lacks, so that decide() can check the quota synchronously (docs/quotas.md).
import { isRejection, type Rejection } from '../errors.ts';
import type { RequestFacts } from '../facts/request-facts.ts';
import { quotaCost } from '../decide/admit.ts';
import { resolveTenant } from '../decide/decide.ts';
import type { QuotaStore } from '../decide/quota.ts';
import type { Generation } from '../decide/generation.ts';

/** At most this many fetches per request: concurrent requests of a tenant may spend a fetched lease first. */
export const QUOTA_WAIT_ROUNDS = 4;

/**
 * A promise while the store is fetching this request's quota (bounded by the
 * store's timeout), else undefined: call again after awaiting, and decide in
 * the same synchronous step as the call that answers undefined.
 */
export function quotaWait(store: QuotaStore, facts: RequestFacts | Rejection, snapshot: Generation, now: number): Promise<void> | undefined {
  if (!store.prepare || isRejection(facts)) return undefined;
  const who = resolveTenant(snapshot, facts.apiKeyHash);
  if (!who.ok) return undefined;
  const tenant = who.value;
  return store.prepare(tenant.id, quotaCost(facts, tenant, snapshot), tenant.quotas, now);
}
