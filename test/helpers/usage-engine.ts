// A vLLM-shaped engine on loopback for admission tests: it answers chat
// completions with as many tokens as a test says (a real model stops at its
// end-of-sequence token, whatever max_tokens allowed: the case quotas must
// settle), reports the queue a test sets on /metrics, and records every body
// it receives. Its JSON bodies and stream chunks follow vLLM's OpenAI server
// field for field: the usage chunk comes only with stream_options.include_usage,
// last, with `choices: []`. Usage can be made to misbehave.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { vllmPage } from '../fleet/fake-engine.ts';

export type UsageFault = 'none' | 'missing' | 'negative' | 'absurd' | 'twice' | 'cut_stream';

export class UsageEngine {
  /** Tokens every answer generates (before max_tokens caps it). */
  completionTokens = 20;
  /** Prompt tokens reported (the engine's own count). */
  promptTokens = 10;
  cachedTokens = 0;
  waiting = 0;
  running = 0;
  kvUsage = 0.1;
  usageFault: UsageFault = 'none';
  /** Spacing of stream chunks. */
  chunkEveryMs = 1;
  /** The prefill: how long before the first byte of the body. */
  firstTokenDelayMs = 0;
  /** Answer completions with this status and vLLM's error body, before any token (e.g. 503: overloaded). */
  failWithStatus: number | undefined;
  /** Bodies of completion requests, parsed, in arrival order. */
  readonly bodies: Record<string, unknown>[] = [];
  url = '';
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();

  constructor(readonly name = 'engine') {
    this.server = createServer((req, res) => this.handle(req, res));
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    if (req.url === '/health') return void res.writeHead(200).end();
    if (req.url === '/metrics')
      return void res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(vllmPage(this.running, this.waiting, this.kvUsage));
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString() || '{}') as Record<string, unknown>;
      this.bodies.push(body);
      const max = (body.max_completion_tokens ?? body.max_tokens) as number | undefined;
      const tokens = Math.min(this.completionTokens, max ?? Infinity);
      const answer = () => {
        if (this.failWithStatus !== undefined) {
          res.writeHead(this.failWithStatus, { 'content-type': 'application/json' });
          return void res.end(
            JSON.stringify({ object: 'error', message: 'The engine is overloaded.', type: 'ServiceUnavailableError', param: null, code: this.failWithStatus }),
          );
        }
        if (body.stream === true) this.stream(res, body, tokens, (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true);
        else this.json(res, body, tokens);
      };
      if (this.firstTokenDelayMs > 0) setTimeout(answer, this.firstTokenDelayMs);
      else answer();
    });
  }

  private usage(tokens: number): unknown {
    switch (this.usageFault) {
      case 'negative':
        return { prompt_tokens: -5, total_tokens: tokens - 5, completion_tokens: tokens };
      case 'absurd':
        return { prompt_tokens: this.promptTokens, total_tokens: 1e15, completion_tokens: 1e15 };
      default:
        return {
          prompt_tokens: this.promptTokens,
          total_tokens: this.promptTokens + tokens,
          completion_tokens: tokens,
          prompt_tokens_details: { cached_tokens: this.cachedTokens },
        };
    }
  }

  private json(res: ServerResponse, body: Record<string, unknown>, tokens: number): void {
    const answer: Record<string, unknown> = {
      id: `chatcmpl-${this.name}`,
      object: 'chat.completion',
      created: 1,
      model: body.model,
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: 'word '.repeat(tokens).trim(), tool_calls: [] },
          logprobs: null,
          finish_reason: 'stop',
          stop_reason: null,
        },
      ],
      service_tier: null,
      system_fingerprint: null,
      prompt_logprobs: null,
    };
    if (this.usageFault !== 'missing') answer.usage = this.usage(tokens);
    let text = JSON.stringify(answer);
    if (this.usageFault === 'twice') text = text.replace('"prompt_logprobs":null', `"prompt_logprobs":null,"usage":${JSON.stringify(this.usage(tokens))}`);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) }).end(text);
  }

  private stream(res: ServerResponse, body: Record<string, unknown>, tokens: number, includeUsage: boolean): void {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    const head = { id: `chatcmpl-${this.name}`, object: 'chat.completion.chunk', created: 1, model: body.model };
    const event = (payload: object) => `data: ${JSON.stringify({ ...head, ...payload })}\n\n`;
    res.write(event({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }] }));
    let sent = 0;
    const next = (): void => {
      if (res.destroyed) return;
      if (this.usageFault === 'cut_stream' && sent === Math.floor(tokens / 2)) return void res.socket?.destroy();
      if (sent === tokens) {
        if (includeUsage && this.usageFault !== 'missing') {
          res.write(event({ choices: [], usage: this.usage(tokens) }));
          if (this.usageFault === 'twice') res.write(event({ choices: [], usage: this.usage(tokens) }));
        }
        res.end('data: [DONE]\n\n');
        return;
      }
      sent++;
      res.write(
        event({ choices: [{ index: 0, delta: { content: 'word ' }, logprobs: null, finish_reason: sent === tokens ? 'stop' : null, stop_reason: null }] }),
      );
      setTimeout(next, this.chunkEveryMs);
    };
    next();
  }
}
