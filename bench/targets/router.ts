// The router under test, in its own process: one pool, one replica (the
// engine), the production chain and a log line per request (to /dev/null).
// argv: ENGINE_URL
import { buildSnapshot } from '../../core/policy/load.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import { fixedPolicy } from '../../core/serve/fixed-policy.ts';
import { routerLogger } from '../../core/observe/logger.ts';
import { startRouter } from '../../core/serve/server.ts';
import { reportCpuOnRequest } from './cpu-reporter.ts';

const files = {
  'models.yaml': 'kind: models\nmodels:\n  - id: bench-model\n    versions: [{ version: v1 }]\n',
  'tenants.yaml': 'kind: tenants\nanonymous: anon\ntenants:\n  - { id: anon, tier: free }\n',
  'pools.yaml': `kind: pools\npools:\n  - name: general\n    model: bench-model\n    version: v1\n    strategies: [session-affinity, prefix-affinity, power-of-two]\n    replicas:\n      - { id: r0, url: "${process.argv[2]}" }\n`,
};
const loaded = buildSnapshot(policyInputsFromTexts(files));
if (!loaded.snapshot) throw new Error('bench policy invalid');
const router = await startRouter({ policy: fixedPolicy(loaded.snapshot), port: 0, admin: { port: 0 }, logger: routerLogger({ destination: '/dev/null' }) });
reportCpuOnRequest();
process.send?.({ url: router.url });
