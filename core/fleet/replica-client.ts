// The HTTP side of watching one replica: GET its /metrics and /health over
// one small keep-alive pool, each request bounded by a deadline so a hung
// engine costs a failed check, never a stuck loop.
import { Pool as ConnectionPool } from 'undici';
import { parsePrometheusText, type ParsedMetrics, type ParseOptions } from './prometheus-text.ts';

export interface ReplicaAnswer {
  readonly status: number;
  readonly body: string;
}

/** A /metrics page larger than this is not an engine's: refuse it rather than parse it. */
const MAX_BODY_BYTES = 16 * 1024 * 1024;
/**
 * The most of a /metrics page read (docs/reliability.md, "Floods"). A vLLM
 * or SGLang page is tens to hundreds of KB; past this the scrape fails
 * rather than cost the event loop more.
 */
export const MAX_METRICS_PAGE_BYTES = 4 * 1024 * 1024;
/** A page is parsed this much at a time, yielding to the event loop in between (about a millisecond each). */
const PARSE_SLICE_BYTES = 64 * 1024;

export class ReplicaClient {
  private readonly pool: ConnectionPool;
  private readonly basePath: string;

  private readonly headers: Record<string, string>;

  /** `apiKey`: the engine's key, for engines that guard /metrics and /health too. */
  constructor(
    url: string,
    private readonly timeoutMs: number,
    apiKey?: string,
  ) {
    this.headers = apiKey === undefined ? { accept: 'text/plain' } : { accept: 'text/plain', authorization: `Bearer ${apiKey}` };
    const parsed = new URL(url);
    // A replica may sit under a path prefix (http://gw/replica-a): keep it.
    this.basePath = parsed.pathname.replace(/\/+$/, '');
    this.pool = new ConnectionPool(parsed.origin, {
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
    return this.bounded(signal, async (deadline) => {
      const response = await this.pool.request({
        method: 'GET',
        path: this.basePath + path,
        headers: this.headers,
        signal: deadline,
      });
      if (!readBody) {
        await response.body.dump();
        return { status: response.statusCode, body: '' };
      }
      return { status: response.statusCode, body: await response.body.text() };
    });
  }

  /**
   * GETs a Prometheus page and parses it as it arrives, a slice of whole
   * lines at a time with a turn of the event loop between slices, so a large
   * page never blocks the router for long; rejects past MAX_METRICS_PAGE_BYTES.
   * `page` is absent when the status is not 200.
   */
  async getMetrics(path: string, signal: AbortSignal, options: ParseOptions): Promise<{ status: number; page?: ParsedMetrics }> {
    return this.bounded(signal, async (deadline) => {
      const response = await this.pool.request({ method: 'GET', path: this.basePath + path, headers: this.headers, signal: deadline });
      if (response.statusCode !== 200) {
        await response.body.dump();
        return { status: response.statusCode };
      }
      const page = new PageParse(options);
      const decoder = new TextDecoder();
      let received = 0;
      let pending = '';
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        received += chunk.length;
        if (received > MAX_METRICS_PAGE_BYTES) {
          response.body.destroy();
          throw new Error(`the metrics page is larger than ${MAX_METRICS_PAGE_BYTES} bytes: not an engine's page`);
        }
        pending += decoder.decode(chunk, { stream: true });
        if (pending.length < PARSE_SLICE_BYTES) continue;
        const lastLine = pending.lastIndexOf('\n');
        if (lastLine < 0) continue;
        page.add(pending.slice(0, lastLine + 1));
        pending = pending.slice(lastLine + 1);
        await new Promise((resolve) => setImmediate(resolve)); // buffered chunks would otherwise be parsed back to back
      }
      page.add(pending + decoder.decode());
      return { status: 200, page: page.result() };
    });
  }

  /** Runs `request` with a signal that aborts at the client's timeout or with `signal`, whichever comes first. */
  private async bounded<T>(signal: AbortSignal, request: (deadline: AbortSignal) => Promise<T>): Promise<T> {
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new Error(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    timer.unref();
    const onAbort = (): void => deadline.abort(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    try {
      return await request(deadline.signal);
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

/** One page parsed in slices of whole lines: the slices' results joined, line numbers counted across them. */
class PageParse {
  private readonly samples: ParsedMetrics['samples'] = [];
  private readonly types: ParsedMetrics['types'] = new Map();
  private skipped = 0;
  private firstSkippedLine: number | undefined;
  private lines = 0;

  constructor(private readonly options: ParseOptions) {}

  add(text: string): void {
    if (text === '') return;
    const part = parsePrometheusText(text, this.options);
    for (const sample of part.samples) this.samples.push(sample);
    for (const [name, type] of part.types) this.types.set(name, type);
    if (part.firstSkippedLine !== undefined && this.firstSkippedLine === undefined) this.firstSkippedLine = this.lines + part.firstSkippedLine;
    this.skipped += part.skipped;
    for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) this.lines++;
  }

  result(): ParsedMetrics {
    const { samples, types, skipped, firstSkippedLine } = this;
    return firstSkippedLine === undefined ? { samples, types, skipped } : { samples, types, skipped, firstSkippedLine };
  }
}
