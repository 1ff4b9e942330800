// The HTTP side of watching one replica: GET its /metrics and /health over
// one small keep-alive pool, each request bounded by a deadline so a hung
// engine costs a failed check, never a stuck loop.
import { Pool } from 'undici';

export interface ReplicaAnswer {
  readonly status: number;
  readonly body: string;
}

/** A /metrics page larger than this is not an engine's: refuse it rather than parse it. */
const MAX_BODY_BYTES = 16 * 1024 * 1024;

export class ReplicaClient {
  private readonly pool: Pool;
  private readonly basePath: string;

  constructor(url: string, private readonly timeoutMs: number) {
    const parsed = new URL(url);
    // A replica may sit under a path prefix (http://gw/replica-a): keep it.
    this.basePath = parsed.pathname.replace(/\/+$/, '');
    this.pool = new Pool(parsed.origin, {
      // Two connections, so a slow metrics page never delays a health check.
      connections: 2,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      connectTimeout: timeoutMs,
      maxResponseSize: MAX_BODY_BYTES,
    });
  }

  /**
   * GETs `path` under the replica's URL. Resolves with any HTTP answer;
   * rejects when none came: refused, reset, timed out, aborted, too large.
   * `readBody` false drains the body unread (health checks).
   */
  async get(path: string, signal: AbortSignal, readBody = true): Promise<ReplicaAnswer> {
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new Error(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    timer.unref();
    const onAbort = (): void => deadline.abort(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    try {
      const response = await this.pool.request({
        method: 'GET',
        path: this.basePath + path,
        headers: { accept: 'text/plain' },
        signal: deadline.signal,
      });
      if (!readBody) {
        await response.body.dump();
        return { status: response.statusCode, body: '' };
      }
      return { status: response.statusCode, body: await response.body.text() };
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** Closes the connections at once, failing any request still open. */
  async close(): Promise<void> {
    if (!this.pool.destroyed) await this.pool.destroy();
  }
}
