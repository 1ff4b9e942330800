// The replica client against an engine that guards /metrics and /health
// with its API key (a vLLM started with --api-key behind a proxy that guards
// every path): the key goes with the scrape and the health check alike.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { ReplicaClient } from '../../core/fleet/replica-client.ts';

const KEY = 'engine-key-0123456789';
const PAGE = '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 3\n';

test('the engine key goes with the /metrics scrape and the /health check; without it the engine says 401', async () => {
  const seen: (string | undefined)[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    seen.push(req.headers.authorization);
    if (req.headers.authorization !== `Bearer ${KEY}`) {
      res.writeHead(401).end('{"error":"Unauthorized"}');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end(req.url === '/metrics' ? PAGE : '');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const keyed = new ReplicaClient(url, 2000, KEY);
  const bare = new ReplicaClient(url, 2000);
  try {
    const signal = new AbortController().signal;
    const metrics = await keyed.getMetrics('/metrics', signal, {});
    assert.equal(metrics.status, 200);
    assert.equal(metrics.page?.samples.find((s) => s.name === 'vllm:num_requests_running')?.value, 3);
    assert.equal((await keyed.get('/health', signal, false)).status, 200);
    assert.equal((await bare.getMetrics('/metrics', signal, {})).status, 401);
    assert.equal((await bare.get('/health', signal, false)).status, 401);
    assert.deepEqual(seen, [`Bearer ${KEY}`, `Bearer ${KEY}`, undefined, undefined]);
  } finally {
    await keyed.close();
    await bare.close();
    server.close();
  }
});
