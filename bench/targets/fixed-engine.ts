// A fake engine for bench:proxy's prompt sizes: it reads the whole body and
// answers at once with a fixed 16-token completion, as JSON or (when the
// body asks for a stream) as vLLM's SSE chunks with a usage chunk, so that
// nearly all the CPU a request costs is in the proxies in front of it.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { vllmPage } from '../../test/fleet/fake-engine.ts';
import { reportCpuOnRequest } from './cpu-reporter.ts';

const TOKENS = 16;
const head = { id: 'chatcmpl-bench', created: 1_700_000_000, model: 'bench-model' };
const usage = { prompt_tokens: 100, completion_tokens: TOKENS, total_tokens: 100 + TOKENS };
const json = JSON.stringify({
  ...head,
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content: ' word'.repeat(TOKENS) }, finish_reason: 'length' }],
  usage,
});
const chunk = (delta: object, finish: string | null) =>
  `data: ${JSON.stringify({ ...head, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const sse =
  chunk({ role: 'assistant', content: '' }, null) +
  Array.from({ length: TOKENS }, (_, i) => chunk({ content: ' word' }, i === TOKENS - 1 ? 'length' : null)).join('') +
  `data: ${JSON.stringify({ ...head, object: 'chat.completion.chunk', choices: [], usage })}\n\ndata: [DONE]\n\n`;
const STREAM = Buffer.from('"stream":true');
const page = vllmPage(0, 0, 0.1, 'bench-model');

const server = createServer((req, res) => {
  if (req.method === 'GET') {
    if (req.url === '/metrics') return void res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(page);
    return void res.writeHead(200).end();
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const last = chunks[chunks.length - 1] ?? Buffer.alloc(0);
    // The bench's bodies end with their stream flag (no need to parse a megabyte here).
    const stream = last.subarray(Math.max(0, last.length - 256)).includes(STREAM);
    if (stream) res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' }).end(sse);
    else res.writeHead(200, { 'content-type': 'application/json' }).end(json);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  reportCpuOnRequest();
  process.send?.({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
});
