// A router with tenant quotas, in its own process, for bench:quota.
// argv: ENGINE_URL REDIS_URL|- LEASE_FRACTION
// The tenant's quota is far above the load: the run measures what enforcing
// it costs, not rejections.
import { buildSnapshot } from '../../core/decide/load.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import { fixedPolicy } from '../../core/serve/fixed-policy.ts';
import { routerLogger } from '../../core/observe/logger.ts';
import { startRouter } from '../../core/serve/server.ts';
import { openQuotaStore } from '../../core/quota/open.ts';
import { reportCpuOnRequest } from './cpu-reporter.ts';
import { registryOf } from '../../core/plugins/registry.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';

const [engineUrl, redisUrl, leaseFraction] = process.argv.slice(2);
const files = {
  'models.yaml': 'kind: models\nmodels:\n  - id: bench-model\n    versions: [{ version: v1 }]\n',
  'tenants.yaml':
    'kind: tenants\nanonymous: anon\ntenants:\n  - { id: anon, tier: free, quotas: { requests_per_minute: 60000, tokens_per_minute: 100000000 } }\n',
  'pools.yaml': `kind: pools\npools:\n  - name: general\n    model: bench-model\n    version: v1\n    strategies: [session-affinity, power-of-two]\n    replicas:\n      - { id: r0, url: "${engineUrl}" }\n`,
  'settings.yaml': `kind: settings\nquota_store: { timeout_ms: 1000, lease_fraction: ${Number(leaseFraction)} }\n`,
};
const loaded = buildSnapshot(policyInputsFromTexts(files, { registry: registryOf(BUILTIN_STRATEGIES) }));
if (!loaded.snapshot) throw new Error('bench policy invalid');
const quota = await openQuotaStore(loaded.snapshot.settings.quotaStore, redisUrl === '-' ? undefined : redisUrl, {
  info: () => {},
  warn: (m) => console.error(m),
});
const router = await startRouter({
  policy: fixedPolicy(loaded.snapshot),
  port: 0,
  admin: { port: 0 },
  quota,
  logger: routerLogger({ destination: '/dev/null' }),
});
reportCpuOnRequest();
process.on('message', (message) => {
  if (message === 'rss') process.send?.({ rss: process.memoryUsage().rss });
});
process.send?.({ url: router.url });
