// Carries out an admitted decision: sends the request to the chosen replica
// and passes the response back byte for byte as it arrives (SSE included,
// never buffered). Before the first byte, a connect error or a 5xx is retried
// once on another replica picked by the same strategy chain; after it,
// nothing is retried and a stream ends with an OpenAI-shaped error event.
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import { rejection, type Rejection } from '../errors.ts';
import type { Decision } from '../decide/decide.ts';
import { sseErrorEvent } from './rejections.ts';

/** How one attempt on one replica ended. */
export type AttemptResult =
  | { readonly kind: 'done'; readonly status: number; readonly ttfbMs: number }
  /** Failed before anything reached the client: safe to retry elsewhere. */
  | { readonly kind: 'retryable'; readonly cause: 'connect' | 'status_5xx'; readonly detail: string; readonly status?: number }
  /** Failed before the first byte, but retrying could double the engine's work (a timeout). */
  | { readonly kind: 'failed'; readonly rejection: Rejection }
  /** Failed after the first byte: the client got an error event or a cut connection. */
  | { readonly kind: 'broken'; readonly detail: string; readonly ttfbMs: number }
  | { readonly kind: 'aborted' };

// Headers that describe one hop, not the response.
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-authenticate', 'proxy-authorization', 'date', 'server']);
const CONNECT_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);

export interface AttemptInput {
  readonly dispatcher: Dispatcher;
  readonly path: string;
  readonly body: string;
  readonly requestId: string;
  readonly decision: Decision;
  readonly stream: boolean;
  readonly res: ServerResponse;
  /**
   * Headers every successful response carries (x-request-id, x-switchyard-*),
   * as a flat [name, value, ...] list of lower-case names. One the engine
   * sent too takes the engine's place in the order, with our value.
   */
  readonly responseHeaders: readonly string[];
}

/**
 * One attempt on one replica. Resolves once the exchange is over; never
 * rejects. The client's response is touched only once a non-5xx status has
 * arrived, so a retryable failure leaves it untouched.
 */
export function attempt(input: AttemptInput): Promise<AttemptResult> {
  return new Promise<AttemptResult>((resolve) => {
    input.dispatcher.dispatch(
      {
        path: input.path,
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: input.stream ? 'text/event-stream' : 'application/json', 'x-request-id': input.requestId },
        body: input.body,
      },
      new Attempt(input, resolve),
    );
  });
}

/**
 * The dispatch handler of one attempt. A class, not closures: this runs for
 * every request, and a handler object of closures costs an allocation each
 * (plus a name-defining call each under tsx).
 */
class Attempt implements Dispatcher.DispatchHandler {
  private readonly started = performance.now();
  private controller: Dispatcher.DispatchController | undefined;
  private committed = false;
  private settled = false;
  private ttfbMs = 0;
  private clientGone = false;
  /** Bound once: the same function must go to res.on and res.off. */
  private readonly onClientClose = this.clientClosed.bind(this);
  private onDrain: (() => void) | undefined;

  constructor(
    private readonly input: AttemptInput,
    private readonly resolve: (result: AttemptResult) => void,
  ) {
    input.res.on('close', this.onClientClose);
  }

  private settle(result: AttemptResult): void {
    if (this.settled) return;
    this.settled = true;
    const { res } = this.input;
    res.off('close', this.onClientClose);
    if (this.onDrain) res.off('drain', this.onDrain);
    this.resolve(result);
  }

  /** The client went away: abort upstream so the engine frees the KV it holds. */
  private clientClosed(): void {
    if (this.input.res.writableFinished) return;
    this.clientGone = true;
    this.controller?.abort(new Error('client disconnected'));
    this.settle({ kind: 'aborted' });
  }

  private drained(): void {
    this.controller?.resume();
  }

  onRequestStart(c: Dispatcher.DispatchController): void {
    this.controller = c;
    if (this.clientGone) c.abort(new Error('client disconnected'));
  }

  onResponseStart(c: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    this.ttfbMs = performance.now() - this.started;
    if (statusCode >= 500) {
      c.abort(new Error(`engine answered ${statusCode}`));
      this.settle({ kind: 'retryable', cause: 'status_5xx', detail: `engine answered ${statusCode}`, status: statusCode });
      return;
    }
    this.committed = true;
    this.input.res.writeHead(statusCode, responseHeaders(headers, this.input.responseHeaders));
  }

  onResponseData(c: Dispatcher.DispatchController, chunk: Buffer): void {
    const { res } = this.input;
    if (!res.write(chunk)) {
      c.pause();
      res.once('drain', (this.onDrain ??= this.drained.bind(this)));
    }
  }

  onResponseEnd(): void {
    const { res } = this.input;
    res.end();
    this.settle({ kind: 'done', status: res.statusCode, ttfbMs: this.ttfbMs });
  }

  onResponseError(_c: Dispatcher.DispatchController, error: Error): void {
    if (this.settled) return;
    if (this.clientGone) return this.settle({ kind: 'aborted' });
    const { input } = this;
    if (!this.committed) {
      const code = (error as { code?: string }).code ?? '';
      if (CONNECT_ERRORS.has(code)) return this.settle({ kind: 'retryable', cause: 'connect', detail: `${code}: ${error.message}` });
      const timeout = code === 'UND_ERR_HEADERS_TIMEOUT';
      return this.settle({
        kind: 'failed',
        rejection: rejection(timeout ? 'upstream_timeout' : 'upstream_error', timeout ? `Replica ${input.decision.replica} sent no response headers in time.` : `Replica ${input.decision.replica} failed: ${error.message}`),
      });
    }
    // Mid-stream: the first byte is out, so no retry. End cleanly for the client.
    if (input.stream) {
      input.res.end(sseErrorEvent(rejection('upstream_error', `The replica serving this stream failed mid-way: ${error.message}`)));
    } else {
      input.res.destroy(error);
    }
    this.settle({ kind: 'broken', detail: error.message, ttfbMs: this.ttfbMs });
  }
}

/**
 * The engine's headers less the hop-by-hop ones, then ours, as a flat list
 * (writeHead's cheapest form). Ours win over the engine's and take their place.
 */
function responseHeaders(engine: IncomingHttpHeaders, ours: readonly string[]): (string | string[])[] {
  const out: (string | string[])[] = [];
  let placed = 0; // bit i: ours[2i] went out in the engine's place
  for (const name in engine) {
    const value = engine[name];
    if (value === undefined || HOP_BY_HOP.has(name)) continue;
    const i = indexOfName(ours, name);
    if (i >= 0) {
      out.push(name, ours[i + 1]);
      placed |= 1 << (i / 2);
    } else {
      out.push(name, value);
    }
  }
  for (let i = 0; i < ours.length; i += 2) if (!(placed & (1 << (i / 2)))) out.push(ours[i], ours[i + 1]);
  return out;
}

function indexOfName(list: readonly string[], name: string): number {
  for (let i = 0; i < list.length; i += 2) if (list[i] === name) return i;
  return -1;
}
