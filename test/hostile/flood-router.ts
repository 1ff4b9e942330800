// The router under the floods of bench/floods.ts, in its own process, in
// front of a minimal engine (in this process: it costs the loop little)
// whose /metrics page is FLOOD_METRICS_BYTES long (a normal vLLM page when
// 0). Reports, on request over IPC, the longest event-loop block and the
// peak RSS since the previous report.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { buildSnapshot } from '../../core/decide/load.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import { fixedPolicy } from '../../core/serve/fixed-policy.ts';
import { routerLogger } from '../../core/observe/logger.ts';
import { startRouter } from '../../core/serve/server.ts';
import { registryOf } from '../../core/plugins/registry.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';
import { vllmPage } from '../fleet/fake-engine.ts';

const metricsBytes = Number(process.env.FLOOD_METRICS_BYTES ?? 0);
let page = vllmPage(1, 0, 0.2);
if (metricsBytes > 0) {
  const lines: string[] = [];
  let size = page.length;
  for (let i = 0; size < metricsBytes; i++) {
    const line = `vllm:request_latency_bucket{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct",lora="a${i % 997}",le="${i}"} ${i}`;
    lines.push(line);
    size += line.length + 1;
  }
  page = `${lines.join('\n')}\n${page}`; // the families we read come last
}
const engine = createServer((req, res) => {
  if (req.url === '/metrics') return void res.writeHead(200, { 'content-type': 'text/plain' }).end(page);
  if (req.url === '/health') return void res.writeHead(200).end();
  req.resume();
  req.on('end', () => {
    const body = JSON.stringify({
      id: 'x',
      object: 'chat.completion',
      created: 1,
      model: 'bench-model',
      choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    });
    res.writeHead(200, { 'content-type': 'application/json' }).end(body);
  });
});
await new Promise<void>((resolve) => engine.listen(0, '127.0.0.1', resolve));
const engineUrl = `http://127.0.0.1:${(engine.address() as AddressInfo).port}`;

const files = {
  'models.yaml': 'kind: models\nmodels:\n  - id: bench-model\n    versions: [{ version: v1 }]\n',
  // sk-test is the only key: keyless and unknown-key requests are 401s.
  'tenants.yaml': 'kind: tenants\ntenants:\n  - { id: t1, tier: free, api_key_sha256: [f3abf2a6cc4f00987743db5f544ba345b4899ae31f326d8ee9c4816de153c9e0] }\n',
  'pools.yaml': `kind: pools\npools:\n  - name: general\n    model: bench-model\n    version: v1\n    strategies: [round-robin]\n    replicas:\n      - { id: r0, url: "${engineUrl}" }\n`,
  'settings.yaml': 'kind: settings\nbody_limit_bytes: 16777216\n',
};
const loaded = buildSnapshot(policyInputsFromTexts(files, { registry: registryOf(BUILTIN_STRATEGIES) }));
if (!loaded.snapshot) throw new Error('bench policy invalid');
const router = await startRouter({ policy: fixedPolicy(loaded.snapshot), port: 0, admin: { port: 0 }, logger: routerLogger({ destination: '/dev/null' }) });

const delay = monitorEventLoopDelay({ resolution: 5 });
delay.enable();
let peakRss = process.memoryUsage().rss;
setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 20).unref();
/** What the machine's load makes of a fixed block: the median of five JSON.parse calls of an 8 MB body (test/hostile/body-block-bounds.test.ts). */
let calibrationText: string | undefined;
function calibrate(): number {
  calibrationText ??= JSON.stringify({ messages: [{ role: 'user', content: 'a '.repeat(4_000_000) }] });
  const text = calibrationText;
  JSON.parse(text); // warm: the first parse of a process is slower
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const started = performance.now();
    JSON.parse(text);
    times.push(performance.now() - started);
  }
  return times.sort((a, b) => a - b)[2];
}

process.on('message', (message) => {
  if (message === 'calibrate') return void process.send?.({ parseMs: calibrate() });
  process.send?.({ maxBlockMs: delay.max / 1e6, peakRssMb: peakRss / 2 ** 20, rssMb: process.memoryUsage().rss / 2 ** 20 });
  delay.reset();
  peakRss = process.memoryUsage().rss;
});
process.send?.({ url: router.url });
// An orderly exit on SIGINT, so that a --cpu-prof profile is written.
process.once('SIGINT', () => process.exit(0));
