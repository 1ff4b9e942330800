// The quota store a router starts with: shared through Redis when a URL is
// given (flag or environment, else settings), else in memory.
import type { Logger } from '../../sdk/index.ts';
import { MemoryQuotaStore, type QuotaStore } from '../decide/quota.ts';
import type { QuotaStoreSettings } from '../policy/compiled.ts';
import { RedisQuotaStore } from './redis-quota-store.ts';

export async function openQuotaStore(
  settings: QuotaStoreSettings,
  urlOverride: string | undefined,
  log: Logger,
): Promise<QuotaStore & { close?(): Promise<void> }> {
  const url = urlOverride ?? settings.redisUrl;
  if (!url) return new MemoryQuotaStore();
  return RedisQuotaStore.open({ ...settings, url }, log);
}
