// Raw HTTP over a loopback socket, for what fetch will not send: CR/LF in
// headers, lying Content-Lengths, half requests, bytes that are not HTTP.
import { connect, type Socket } from 'node:net';

export interface RawAnswer {
  /** The status of the first response, if one came. */
  readonly status?: number;
  readonly head: string;
  readonly body: string;
  /** Milliseconds until the answer was complete or the connection closed. */
  readonly ms: number;
  /** The server closed the connection. */
  readonly closed: boolean;
}

export function hostPort(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port) };
}

export function openSocket(url: string): Promise<Socket> {
  const { host, port } = hostPort(url);
  return new Promise((resolve, reject) => {
    const socket = connect(port, host, () => resolve(socket));
    socket.once('error', reject);
  });
}

/**
 * Sends `bytes`, then reads until one response is complete (by its
 * Content-Length) or the server closes. Rejects after `timeoutMs`: a hang is a
 * failure, never a wait.
 */
export async function rawExchange(url: string, bytes: string | Buffer, timeoutMs = 10_000): Promise<RawAnswer> {
  const started = Date.now();
  const socket = await openSocket(url);
  socket.on('error', () => {}); // a reset after the answer is fine
  return new Promise((resolve, reject) => {
    let data = Buffer.alloc(0);
    let done = false;
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      const text = data.toString('latin1');
      const split = text.indexOf('\r\n\r\n');
      const head = split < 0 ? text : text.slice(0, split);
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(head);
      resolve({
        status: match ? Number(match[1]) : undefined,
        head,
        body: split < 0 ? '' : data.subarray(Buffer.byteLength(text.slice(0, split + 4), 'latin1')).toString('utf8'),
        ms: Date.now() - started,
        closed,
      });
      socket.destroy();
    };
    const timer = setTimeout(() => {
      if (done) return;
      done = true;
      socket.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms (got ${JSON.stringify(data.toString('latin1').slice(0, 200))})`));
    }, timeoutMs);
    socket.on('data', (chunk) => {
      data = Buffer.concat([data, chunk]);
      // Interim answers (100 Continue) come before the one that counts.
      while (/^HTTP\/1\.1 1\d\d [^\r]*\r\n\r\n/.test(data.toString('latin1', 0, 200))) data = data.subarray(data.indexOf('\r\n\r\n') + 4);
      const text = data.toString('latin1');
      const split = text.indexOf('\r\n\r\n');
      if (split < 0) return;
      const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, split));
      if (length && data.length >= split + 4 + Number(length[1])) finish(false);
    });
    socket.on('close', () => finish(true));
    socket.write(bytes);
  });
}

/** Resolves with the milliseconds until the server closes the socket; rejects past `timeoutMs`. */
export function closedWithin(socket: Socket, timeoutMs: number): Promise<number> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    if (socket.destroyed) return resolve(0);
    const timer = setTimeout(() => reject(new Error(`socket still open after ${timeoutMs} ms`)), timeoutMs);
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Date.now() - started);
    });
  });
}

/**
 * Asserts an OpenAI-shaped error body and returns it. The router's own codes are
 * strings; an engine's error passed through may carry its HTTP status as the
 * code, as vLLM's do (`engine: true`).
 */
export function openAiError(body: string, engine = false): { message: string; type: string; param: string | null; code: string } {
  const parsed = JSON.parse(body) as { error?: { message?: unknown; type?: unknown; param?: unknown; code?: unknown } };
  const e = parsed.error;
  const codeOk = typeof e?.code === 'string' || (engine && (typeof e?.code === 'number' || e?.code === null));
  if (!e || typeof e.message !== 'string' || typeof e.type !== 'string' || !codeOk || !('param' in e)) {
    throw new Error(`not an OpenAI-shaped error: ${body.slice(0, 300)}`);
  }
  return e as { message: string; type: string; param: string | null; code: string };
}
