// npm run bench:body-block — the longest event-loop block one request with a
// multi-MB body causes in the router (docs/serving.md, "Performance"): 1 MB,
// 8 MB and the largest body the default body_limit_bytes admits, one request
// at a time, in front of a fake engine that answers at once (its own process).
// The router runs in this process, the client too (it only writes a ready
// Buffer); the block is monitorEventLoopDelay's maximum over each request.
import { fork } from 'node:child_process';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Pool } from 'undici';
import { routerLogger } from '../core/observe/logger.ts';
import { policyInputsFromTexts } from '../core/policy/inputs.ts';
import { buildSnapshot } from '../core/decide/load.ts';
import { registryOf } from '../core/plugins/registry.ts';
import { fixedPolicy } from '../core/serve/fixed-policy.ts';
import { startRouter } from '../core/serve/server.ts';
import { BUILTIN_STRATEGIES } from '../plugins/index.ts';

const REPEATS = Number(process.env.BENCH_REPEATS ?? 3);
const engineChild = fork(new URL('./targets/fixed-engine.ts', import.meta.url).pathname, [], {
  execArgv: ['--import', 'tsx'],
  stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
});
const engineUrl = await new Promise<string>((resolve) => engineChild.once('message', (m) => resolve((m as { url: string }).url)));
const files = {
  'models.yaml': 'kind: models\nmodels:\n  - id: bench-model\n    versions: [{ version: v1 }]\n',
  'tenants.yaml': 'kind: tenants\nanonymous: anon\ntenants:\n  - { id: anon, tier: free }\n',
  'pools.yaml': `kind: pools\npools:\n  - name: general\n    model: bench-model\n    version: v1\n    strategies: [session-affinity, prefix-affinity, power-of-two]\n    replicas:\n      - { id: r0, url: "${engineUrl}" }\n`,
};
const loaded = buildSnapshot(policyInputsFromTexts(files, { registry: registryOf(BUILTIN_STRATEGIES) }));
if (!loaded.snapshot) throw new Error('bench policy invalid');
const bodyLimit = loaded.snapshot.settings.bodyLimitBytes;
const router = await startRouter({ policy: fixedPolicy(loaded.snapshot), port: 0, admin: false, logger: routerLogger({ destination: '/dev/null' }) });
const pool = new Pool(router.url, { connections: 1 });

/** A chat body of `bytes` bytes: a long document in 64 KB messages (a long conversation), then a question. */
function body(bytes: number, stream: boolean): Buffer {
  const piece = 'The replica keeps the prefix of this conversation in its cache; the router reads it once. ';
  const message = piece.repeat(Math.ceil(65_536 / piece.length)).slice(0, 65_536);
  const messages: { role: string; content: string }[] = [];
  const head = JSON.stringify({ model: 'bench-model', messages: [], max_tokens: 16, stream }).length;
  let size = head;
  while (size + message.length + 40 < bytes) {
    messages.push({ role: messages.length % 2 ? 'assistant' : 'user', content: message });
    size += message.length + 32;
  }
  messages.push({ role: 'user', content: 'Summarise it.' });
  return Buffer.from(JSON.stringify({ model: 'bench-model', messages, max_tokens: 16, stream }));
}

const histogram = monitorEventLoopDelay({ resolution: 1 });
histogram.enable();
console.log('bench:body-block — the longest event-loop block of the router during one request (ms), each size sent alone, ' + REPEATS + ' times');
for (const [name, bytes] of [
  ['1 MB', 1_000_000],
  ['8 MB', 8_000_000],
  [`the limit (${bodyLimit} B)`, bodyLimit - 1024],
] as const) {
  for (const stream of [false, true]) {
    const sent = body(bytes, stream);
    const blocks: number[] = [];
    for (let i = 0; i < REPEATS + 1; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      histogram.reset();
      const response = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers: { 'content-type': 'application/json' }, body: sent });
      await response.body.text();
      if (response.statusCode !== 200) throw new Error(`${name}: status ${response.statusCode}`);
      if (i > 0) blocks.push(histogram.max / 1e6); // the first one warms up
    }
    console.log(
      `${name.padEnd(24)} ${stream ? 'SSE ' : 'JSON'} ${(sent.length / 1e6).toFixed(2)} MB: longest block ${blocks.map((b) => b.toFixed(0)).join(' / ')} ms`,
    );
  }
}
await pool.close();
await router.close(1000);
engineChild.kill('SIGINT');
process.exit(0);
