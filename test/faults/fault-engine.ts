// A fake OpenAI-compatible engine on loopback that misbehaves on demand: raw
// node:http, with direct access to the socket for the faults no well-behaved
// server would commit (garbage bytes, half a status line, a reset after
// reading). Every completion request it sees is recorded by x-request-id, so
// a test knows exactly which engines a request reached.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { vllmPage } from '../fleet/fake-engine.ts';

export type Fault =
  /** Answers well: JSON, or SSE chunks every `chunkEveryMs`. */
  | 'none'
  /** Accepts the completion request and never answers; /health stays fine. */
  | 'hang'
  /** Never answers anything, /health included. */
  | 'hang_all'
  /** 500 with an OpenAI-shaped error body. */
  | 'status_500'
  /** 200 SSE (or JSON headers), `cutAfterChunks` whole chunks and half of the next, then the socket dies. */
  | 'die_mid_stream'
  /** Bytes that are not HTTP, then the connection ends. */
  | 'garbage'
  /** "HTTP/1.1 2" and the connection ends. */
  | 'half_status_line'
  /** content-length 1000, 20 bytes, then the socket dies. */
  | 'half_body'
  /** content-length 1000, 20 bytes, then silence. */
  | 'half_body_hang'
  /** Reads the whole request, then resets the connection. */
  | 'reset_after_read'
  /** The answer comes after `slowFirstByteMs` (30 s by default). */
  | 'slow_first_byte'
  /** Accepts a non-streaming request and never answers it; streams, /health and /metrics stay fine. */
  | 'hang_unary';

export class FaultEngine {
  fault: Fault = 'none';
  /** SSE chunks in a healthy stream when the request has no max_tokens, and their spacing. */
  chunks = 5;
  chunkEveryMs = 5;
  cutAfterChunks = 2;
  slowFirstByteMs = 30_000;
  /** A non-streaming answer takes this long per max_tokens (a long generation is legitimately slow). */
  msPerToken = 0;
  /** Padding in each SSE chunk, to fill a client's buffers. */
  chunkPadBytes = 0;
  /** Completion requests whose connection closed before the answer was complete, by x-request-id. */
  readonly cutOff: string[] = [];
  /** Sent with every well-formed stream's headers (hop-by-hop ones, to see them dropped). */
  streamHeaders: Record<string, string> = {};
  /** Completion requests by x-request-id, in arrival order (counted on arrival, before the body). */
  readonly seen: string[] = [];
  healthChecks = 0;
  url = '';
  private readonly server: Server;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly sockets = new Set<Socket>();

  constructor(readonly name: string) {
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

  /** How many completion requests with this id reached this engine. */
  hits(requestId: string): number {
    let n = 0;
    for (const id of this.seen) if (id === requestId) n++;
    return n;
  }

  async stop(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private later(ms: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn();
    }, ms);
    this.timers.add(timer);
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const completion = req.url !== '/health' && req.url !== '/metrics';
    if (completion) this.seen.push(String(req.headers['x-request-id']));
    if (this.fault === 'hang_all') return;
    if (req.url === '/health') {
      this.healthChecks++;
      res.writeHead(200).end();
      return;
    }
    if (req.url === '/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(vllmPage(0, 0, 0.1));
      return;
    }
    res.on('close', () => {
      if (!res.writableFinished) this.cutOff.push(String(req.headers['x-request-id']));
    });
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString() || '{}') as { stream?: boolean; model?: string; max_tokens?: number };
      this.answer(req, res, body.stream === true, body.model ?? 'unknown', body.max_tokens ?? this.chunks);
    });
  }

  private answer(req: IncomingMessage, res: ServerResponse, stream: boolean, model: string, chunks: number): void {
    const socket = req.socket;
    switch (this.fault) {
      case 'hang':
        return;
      case 'hang_unary':
        if (!stream) return;
        this.serve(res, stream, model, chunks);
        return;
      case 'status_500':
        res
          .writeHead(500, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: { message: 'CUDA error: an illegal memory access', type: 'InternalServerError', param: null, code: 500 } }));
        return;
      case 'garbage':
        socket.end('\x00\x17\x03\xff garbage, not HTTP \xfe\r\n\r\n');
        return;
      case 'half_status_line':
        socket.end('HTTP/1.1 2');
        return;
      case 'reset_after_read':
        socket.resetAndDestroy();
        return;
      case 'half_body':
      case 'half_body_hang':
        res.writeHead(200, { 'content-type': stream ? 'text/event-stream' : 'application/json', 'content-length': '1000' });
        res.write(stream ? 'data: {"choices":[]}\n\n' : '{"id":"x","object":"c');
        if (this.fault === 'half_body') this.later(20, () => socket.destroy());
        return;
      case 'slow_first_byte':
        this.later(this.slowFirstByteMs, () => this.serve(res, stream, model, chunks));
        return;
      case 'die_mid_stream':
        this.serve(res, stream, model, chunks, this.cutAfterChunks, () => socket.destroy());
        return;
      default:
        if (this.msPerToken > 0 && !stream) this.later(this.msPerToken * chunks, () => this.serve(res, stream, model, chunks));
        else this.serve(res, stream, model, chunks);
    }
  }

  /** A well-formed answer (`chunks` SSE events on a stream); with `cutAfter`, half of event `cutAfter` goes out and then `cut` runs. */
  private serve(res: ServerResponse, stream: boolean, model: string, chunks: number, cutAfter?: number, cut?: () => void): void {
    if (!stream) {
      const body = JSON.stringify({
        id: `cmpl-${this.name}`,
        object: 'chat.completion',
        created: 1,
        model,
        choices: [{ index: 0, message: { role: 'assistant', content: `from ${this.name}` }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
      });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }).end(body);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', ...this.streamHeaders });
    let sent = 0;
    const next = (): void => {
      if (res.destroyed) return;
      const content = `${this.name}:${sent} ${this.chunkPadBytes ? '.'.repeat(this.chunkPadBytes) : ''}`;
      const event = `data: ${JSON.stringify({ id: `chunk-${this.name}`, object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
      if (cutAfter !== undefined && sent === cutAfter) {
        res.write(event.slice(0, event.length >> 1));
        this.later(20, cut!);
        return;
      }
      if (sent === chunks) {
        res.end('data: [DONE]\n\n');
        return;
      }
      res.write(event);
      sent++;
      this.later(this.chunkEveryMs, next);
    };
    next();
  }
}
