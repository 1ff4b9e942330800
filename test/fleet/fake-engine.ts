// A stand-in engine for the fleet tests: a real node:http server on
// 127.0.0.1 that serves /metrics and /health as the test sets them, and can
// stop answering (hang) or drop every connection (reset).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type FakeMode = 'serve' | 'hang' | 'reset';

export class FakeEngine {
  metrics = '';
  metricsStatus = 200;
  healthStatus = 200;
  /** Delay before answering /metrics, to catch overlapping scrapes. */
  metricsDelayMs = 0;
  mode: FakeMode = 'serve';
  metricsRequests = 0;
  healthAnswers = 0;
  maxConcurrentMetrics = 0;
  private concurrentMetrics = 0;
  private readonly hung: ServerResponse[] = [];
  private readonly server: Server;
  url = '';

  constructor(metrics = '') {
    this.metrics = metrics;
    this.server = createServer((req, res) => this.handle(req, res));
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    const { port } = this.server.address() as AddressInfo;
    this.url = `http://127.0.0.1:${port}`;
    return this.url;
  }

  async stop(): Promise<void> {
    for (const res of this.hung.splice(0)) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    if (this.mode === 'reset') {
      req.socket.destroy();
      return;
    }
    if (this.mode === 'hang') {
      this.hung.push(res);
      return;
    }
    if (req.url === '/metrics') {
      this.metricsRequests++;
      this.concurrentMetrics++;
      this.maxConcurrentMetrics = Math.max(this.maxConcurrentMetrics, this.concurrentMetrics);
      const answer = (): void => {
        this.concurrentMetrics--;
        res.writeHead(this.metricsStatus, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
        res.end(this.metrics);
      };
      if (this.metricsDelayMs > 0) setTimeout(answer, this.metricsDelayMs);
      else answer();
      return;
    }
    if (req.url === '/health') {
      if (this.healthStatus >= 200 && this.healthStatus < 300) this.healthAnswers++;
      res.writeHead(this.healthStatus);
      res.end();
      return;
    }
    res.writeHead(404);
    res.end();
  }
}

/** vLLM V1 metrics with the given load, shaped like the real page. */
export function vllmPage(running: number, waiting: number, kvUsage: number, model = 'meta-llama/Llama-3.1-8B-Instruct'): string {
  return [
    '# HELP vllm:num_requests_running Number of requests in model execution batches.',
    '# TYPE vllm:num_requests_running gauge',
    `vllm:num_requests_running{engine="0",model_name="${model}"} ${running.toFixed(1)}`,
    '# HELP vllm:num_requests_waiting Number of requests waiting to be processed.',
    '# TYPE vllm:num_requests_waiting gauge',
    `vllm:num_requests_waiting{engine="0",model_name="${model}"} ${waiting.toFixed(1)}`,
    '# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.',
    '# TYPE vllm:kv_cache_usage_perc gauge',
    `vllm:kv_cache_usage_perc{engine="0",model_name="${model}"} ${kvUsage}`,
    '',
  ].join('\n');
}

/** Polls until `check` holds; fails the test with `what` after `timeoutMs`. */
export async function waitFor(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
