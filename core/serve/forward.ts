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
  /** Headers every successful response carries (x-request-id, x-switchyard-*). */
  readonly responseHeaders: Record<string, string>;
}

/**
 * One attempt on one replica. Resolves once the exchange is over; never
 * rejects. The client's response is touched only once a non-5xx status has
 * arrived, so a retryable failure leaves it untouched.
 */
export function attempt(input: AttemptInput): Promise<AttemptResult> {
  const { res } = input;
  return new Promise<AttemptResult>((resolve) => {
    const started = performance.now();
    let controller: Dispatcher.DispatchController | undefined;
    let committed = false;
    let settled = false;
    let ttfbMs = 0;
    let clientGone = false;

    const settle = (result: AttemptResult) => {
      if (settled) return;
      settled = true;
      res.off('close', onClientClose);
      res.off('drain', onDrain);
      resolve(result);
    };
    // The client went away: abort upstream so the engine frees the KV it holds.
    const onClientClose = () => {
      if (res.writableFinished) return;
      clientGone = true;
      controller?.abort(new Error('client disconnected'));
      settle({ kind: 'aborted' });
    };
    const onDrain = () => controller?.resume();
    res.on('close', onClientClose);

    input.dispatcher.dispatch(
      {
        path: input.path,
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: input.stream ? 'text/event-stream' : 'application/json', 'x-request-id': input.requestId },
        body: input.body,
      },
      {
        onRequestStart(c) {
          controller = c;
          if (clientGone) c.abort(new Error('client disconnected'));
        },
        onResponseStart(c, statusCode, headers) {
          ttfbMs = performance.now() - started;
          if (statusCode >= 500) {
            c.abort(new Error(`engine answered ${statusCode}`));
            settle({ kind: 'retryable', cause: 'status_5xx', detail: `engine answered ${statusCode}`, status: statusCode });
            return;
          }
          committed = true;
          res.writeHead(statusCode, { ...passThrough(headers), ...input.responseHeaders });
        },
        onResponseData(c, chunk) {
          if (!res.write(chunk)) {
            c.pause();
            res.once('drain', onDrain);
          }
        },
        onResponseEnd() {
          res.end();
          settle({ kind: 'done', status: res.statusCode, ttfbMs });
        },
        onResponseError(_c, error) {
          if (settled) return;
          if (clientGone) return settle({ kind: 'aborted' });
          if (!committed) {
            const code = (error as { code?: string }).code ?? '';
            if (CONNECT_ERRORS.has(code)) return settle({ kind: 'retryable', cause: 'connect', detail: `${code}: ${error.message}` });
            const timeout = code === 'UND_ERR_HEADERS_TIMEOUT';
            return settle({
              kind: 'failed',
              rejection: rejection(timeout ? 'upstream_timeout' : 'upstream_error', timeout ? `Replica ${input.decision.replica} sent no response headers in time.` : `Replica ${input.decision.replica} failed: ${error.message}`),
            });
          }
          // Mid-stream: the first byte is out, so no retry. End cleanly for the client.
          if (input.stream) {
            res.end(sseErrorEvent(rejection('upstream_error', `The replica serving this stream failed mid-way: ${error.message}`)));
          } else {
            res.destroy(error);
          }
          settle({ kind: 'broken', detail: error.message, ttfbMs });
        },
      },
    );
  });
}

function passThrough(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  }
  return out;
}
