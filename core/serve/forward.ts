// Carries out an admitted decision on one replica: sends the request and
// passes the response back as it arrives (SSE included, never buffered beyond
// the end of the last whole event). Nothing reaches the client before the
// engine's first body byte: until then, any failure (connect error, 5xx,
// timeout, reset, garbage) leaves the client's response untouched and can be
// retried elsewhere (proxy.ts decides); on a stream, until its first whole
// event. After that, nothing is retried: a stream ends with one OpenAI-shaped
// error event, any other body is cut.
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import { rejection } from '../errors.ts';
import type { UpstreamOutcome } from '../fleet/outlier.ts';
import type { UpstreamSettings } from '../decide/generation.ts';
import { sseErrorEvent } from './rejections.ts';

/** Why an attempt failed, in the terms of outlier detection and the retry metrics. */
export type FailureCause = Exclude<UpstreamOutcome, 'success'>;

/** How one attempt on one replica ended. */
export type AttemptResult =
  | { readonly kind: 'done'; readonly status: number; readonly ttfbMs: number }
  /** Failed before anything reached the client: safe to retry elsewhere. */
  | { readonly kind: 'retryable'; readonly cause: FailureCause; readonly detail: string; readonly status?: number; readonly retryAfter?: string }
  /** Failed after the first byte: the client got an error event or a cut connection. */
  | { readonly kind: 'broken'; readonly cause: FailureCause; readonly detail: string; readonly ttfbMs: number }
  /**
   * The client left (or stopped reading for longer than the send timeout:
   * `stalled`). `beforeFirstByte`: the engine had sent nothing by then, after
   * `waitedMs` (silence.ts may count that against it).
   */
  | { readonly kind: 'aborted'; readonly beforeFirstByte?: boolean; readonly waitedMs?: number; readonly stalled?: boolean };

// Headers that describe one hop, not the response (RFC 9110 §7.6.1), and
// the engine's date and server.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'date',
  'server',
]);
const CONNECT_ERRORS = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']);
const TIMEOUT_ERRORS = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
/** A partial SSE event longer than this is passed on without waiting for its end (a hostile engine's endless line). */
const MAX_HELD_EVENT_BYTES = 256 * 1024;
/** Engine text (error messages) kept in a result's detail, for logs and /admin/state. */
const MAX_DETAIL_CHARS = 200;

export interface AttemptInput {
  readonly dispatcher: Dispatcher;
  /** The replica: its attempts still waiting for an answer can be abandoned (see Waiting). */
  readonly replica: string;
  readonly waiting: Waiting;
  readonly path: string;
  readonly body: string | Buffer;
  /** The body's type when it is not JSON (a multipart upload, forwarded as it came). */
  readonly contentType?: string;
  /** The engine's API key (the replica's api_key_env): sent as its bearer token. */
  readonly engineKey?: string;
  /** How a stream that breaks mid-way is ended (default: an OpenAI-shaped error event). */
  readonly errorEvent?: (r: ReturnType<typeof rejection>) => string;
  readonly requestId: string;
  readonly stream: boolean;
  readonly timeouts: UpstreamSettings;
  readonly res: ServerResponse;
  /**
   * Headers every successful response carries (x-request-id, x-switchyard-*),
   * as a flat [name, value, ...] list of lower-case names. One the engine
   * sent too takes the engine's place in the order, with our value.
   */
  readonly responseHeaders: readonly string[];
  /** Trace context for the engine (traceparent, tracestate), when tracing is on. */
  readonly traceHeaders?: Readonly<Record<string, string>>;
  /**
   * Before the first byte, `check` runs after `firstCheckMs`, then again after
   * whatever delay it returns, until it returns undefined (it judged the
   * silence; the request keeps waiting: silence.ts).
   */
  readonly silence?: { readonly firstCheckMs: number; check(): number | undefined };
  /** When the attempt started (performance.now()), if the caller has read the clock already: its time to first byte counts from there. */
  readonly startedAt?: number;
  /** A client that reads nothing of the response for this long has it aborted, upstream too. */
  readonly sendTimeoutMs?: number;
  /** Reads the engine's usage as the response passes (usage-tap.ts); may remove the usage chunk the router asked for. */
  readonly tap?: { data(chunk: Buffer, sse: boolean): Buffer };
  /** The engine's first body byte is going out: its prefill is over (load in tokens). */
  readonly onFirstByte?: () => void;
}

/**
 * One attempt on one replica. Resolves once the exchange is over; never
 * rejects. The client's response is touched only once the engine's first body
 * byte (or its empty body's end) arrives with a status below 500.
 */
export function attempt(input: AttemptInput): Promise<AttemptResult> {
  // The client left during an earlier attempt: its 'close' has fired already.
  if (input.res.destroyed) return Promise.resolve({ kind: 'aborted' });
  return new Promise<AttemptResult>((resolve) => {
    const { timeouts, stream } = input;
    const headers: Record<string, string> = {
      'content-type': input.contentType ?? 'application/json',
      accept: stream ? 'text/event-stream' : 'application/json',
      'x-request-id': input.requestId,
    };
    if (input.traceHeaders) Object.assign(headers, input.traceHeaders);
    if (input.engineKey !== undefined) headers.authorization = `Bearer ${input.engineKey}`;
    input.dispatcher.dispatch(
      {
        path: input.path,
        method: 'POST',
        headers,
        body: input.body,
        headersTimeout: stream ? timeouts.streamHeadersTimeoutMs : timeouts.headersTimeoutMs,
        bodyTimeout: stream ? timeouts.streamIdleTimeoutMs : timeouts.bodyTimeoutMs,
      },
      new Attempt(input, resolve),
    );
  });
}

/** Module functions, not closures per attempt: setTimeout passes the attempt. */
function checkSilence(attempt: Attempt): void {
  attempt.silenceCheck();
}

function stallTimedOut(attempt: Attempt): void {
  attempt.stall();
}

/**
 * The dispatch handler of one attempt. A class, not closures: this runs for
 * every request, and a handler object of closures costs an allocation each
 * (plus a name-defining call each under tsx).
 */
class Attempt implements Dispatcher.DispatchHandler {
  private readonly started: number;
  private controller: Dispatcher.DispatchController | undefined;
  /** Status and headers arrived (below 500); not yet sent. */
  private status = 0;
  private engineHeaders: IncomingHttpHeaders | undefined;
  /** The client's response has its status line: no retry from here on. */
  private headersSent = false;
  /** The body is SSE (text/event-stream). */
  private eventStream = false;
  /** ...and not encoded: we can end it with an error event of our own. */
  private sse = false;
  /** The bytes after the last whole SSE event, held until the event ends. */
  private heldEvent: Buffer | undefined;
  /** An overlong event went out unfinished: an error event appended now would be garbled. */
  private midEvent = false;
  private settled = false;
  private ttfbMs = 0;
  private clientGone = false;
  /** Bound once: the same function must go to res.on and res.off. */
  private readonly onClientClose = this.clientClosed.bind(this);
  private onDrain: (() => void) | undefined;
  /** The silence deadline, then the send (write-stall) timeout: one timer at a time. */
  private timer: NodeJS.Timeout | undefined;
  private stalled = false;
  /** The engine's status line arrived. */
  private answered = false;

  constructor(
    private readonly input: AttemptInput,
    private readonly resolve: (result: AttemptResult) => void,
  ) {
    this.started = input.startedAt ?? performance.now();
    input.res.on('close', this.onClientClose);
    input.waiting.add(input.replica, this);
    if (input.silence) this.timer = setTimeout(checkSilence, input.silence.firstCheckMs, this).unref();
  }

  /** The silence timer fired (checkSilence): judge, or wait on. */
  silenceCheck(): void {
    const next = this.input.silence!.check();
    if (next !== undefined && !this.answered && !this.settled) this.timer = setTimeout(checkSilence, next, this).unref();
  }

  /**
   * Gives up on an engine that has sent nothing yet (it was ejected for
   * hanging): the request is retried elsewhere rather than wait out its timeout.
   */
  abandon(detail: string): void {
    if (this.headersSent || this.settled) return;
    this.settle({ kind: 'retryable', cause: 'timeout', detail });
    this.controller?.abort(new Error(detail));
  }

  private settle(result: AttemptResult): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    this.input.waiting.remove(this.input.replica, this);
    const { res } = this.input;
    res.off('close', this.onClientClose);
    if (this.onDrain) res.off('drain', this.onDrain);
    this.resolve(result);
  }

  /** The client went away: abort upstream so the engine frees the KV it holds. */
  private clientClosed(): void {
    if (this.input.res.writableFinished) return;
    this.clientGone = true;
    const beforeFirstByte = !this.answered;
    this.settle({
      kind: 'aborted',
      beforeFirstByte,
      waitedMs: beforeFirstByte ? performance.now() - this.started : undefined,
      stalled: this.stalled || undefined,
    });
    this.controller?.abort(new Error('client disconnected'));
  }

  private drained(): void {
    clearTimeout(this.timer);
    this.controller?.resume();
  }

  /** The client read nothing for the send timeout (stallTimedOut): it goes, and the engine request with it. */
  stall(): void {
    this.stalled = true;
    this.input.res.destroy(); // 'close' follows: clientClosed() aborts upstream
  }

  onRequestStart(c: Dispatcher.DispatchController): void {
    this.controller = c;
    if (this.clientGone) c.abort(new Error('client disconnected'));
  }

  onResponseStart(c: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    this.ttfbMs = performance.now() - this.started;
    this.answered = true;
    clearTimeout(this.timer);
    if (statusCode >= 500) {
      // Settle before abort(): undici calls onResponseError from inside it.
      // The engine's own Retry-After is kept: the client hears it if no other replica answers.
      const retryAfter = headers['retry-after'];
      this.settle({
        kind: 'retryable',
        cause: 'status_5xx',
        detail: `engine answered ${statusCode}`,
        status: statusCode,
        retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined,
      });
      c.abort(new Error(`engine answered ${statusCode}`));
      return;
    }
    this.status = statusCode;
    this.engineHeaders = headers;
    const type = headers['content-type'];
    this.eventStream = typeof type === 'string' && type.startsWith('text/event-stream');
    // Ours to end with an error event only if we can append plain bytes to it.
    this.sse = this.eventStream && headers['content-encoding'] === undefined;
  }

  /** Sends the status line and headers: from here on the request belongs to this replica. */
  private sendHeaders(): void {
    this.headersSent = true;
    this.input.onFirstByte?.();
    this.input.waiting.remove(this.input.replica, this);
    this.input.res.writeHead(this.status, responseHeaders(this.engineHeaders!, this.input.responseHeaders, this.eventStream || this.input.stream));
  }

  onResponseData(c: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.settled) return;
    if (this.sse) {
      chunk = this.wholeEvents(chunk);
      if (chunk.length === 0) return; // nothing whole yet: a stream that dies now can still be retried
    }
    if (this.input.tap) {
      chunk = this.input.tap.data(chunk, this.sse);
      if (chunk.length === 0) return; // only the usage chunk the client did not ask for
    }
    if (!this.headersSent) this.sendHeaders();
    const { res } = this.input;
    if (!res.write(chunk)) {
      c.pause();
      res.once('drain', (this.onDrain ??= this.drained.bind(this)));
      if (this.input.sendTimeoutMs) this.timer = setTimeout(stallTimedOut, this.input.sendTimeoutMs, this).unref();
    }
  }

  /** The whole SSE events in what arrived; the rest is held until its event ends. */
  private wholeEvents(chunk: Buffer): Buffer {
    const data = this.heldEvent ? Buffer.concat([this.heldEvent, chunk]) : chunk;
    this.heldEvent = undefined;
    const end = eventsEnd(data);
    if (end === data.length) {
      this.midEvent = false;
      return data;
    }
    if (data.length - end > MAX_HELD_EVENT_BYTES) {
      this.midEvent = true;
      return data;
    }
    this.heldEvent = Buffer.from(data.subarray(end)); // a copy: the socket's buffer is not ours to keep
    this.midEvent = false;
    return data.subarray(0, end);
  }

  onResponseEnd(): void {
    if (this.settled) return;
    if (!this.headersSent) this.sendHeaders();
    const { res } = this.input;
    if (this.heldEvent) res.write(this.heldEvent); // the engine ended without a blank line: its bytes, as sent
    res.end();
    this.settle({ kind: 'done', status: this.status, ttfbMs: this.ttfbMs });
  }

  onResponseError(_c: Dispatcher.DispatchController, error: Error): void {
    if (this.settled) return;
    if (this.clientGone) return this.settle({ kind: 'aborted' });
    const code = (error as { code?: string }).code ?? '';
    const cause: FailureCause = CONNECT_ERRORS.has(code) ? 'connect' : TIMEOUT_ERRORS.has(code) ? 'timeout' : 'protocol';
    const detail = `${code ? `${code}: ` : ''}${error.message}`.slice(0, MAX_DETAIL_CHARS);
    if (!this.headersSent) return this.settle({ kind: 'retryable', cause, detail });
    // Mid-body: the first byte is out, so no retry. End so the client knows.
    const { res } = this.input;
    if (this.sse && !this.midEvent) {
      // The held partial event is dropped: the client sees whole events, then one error event, then a clean end.
      const failure = rejection(
        cause === 'timeout' ? 'upstream_timeout' : 'upstream_error',
        cause === 'timeout' ? 'The replica serving this stream went silent mid-way.' : 'The replica serving this stream failed mid-way.',
      );
      res.end((this.input.errorEvent ?? sseErrorEvent)(failure));
    } else {
      // A body cut short must not look complete, nor leave the client waiting for the rest.
      res.destroy();
    }
    this.settle({ kind: 'broken', cause, detail, ttfbMs: this.ttfbMs });
  }
}

/**
 * The attempts of each replica that have sent nothing to their client yet.
 * When a replica is ejected for timeouts (it hangs), the requests still
 * waiting on it are abandoned and retried elsewhere at once: a non-streaming
 * request would otherwise wait out its whole time-to-headers timeout.
 */
export class Waiting {
  private readonly byReplica = new Map<string, Set<Attempt>>();

  add(replica: string, attempt: Attempt): void {
    let set = this.byReplica.get(replica);
    if (!set) this.byReplica.set(replica, (set = new Set()));
    set.add(attempt);
  }

  remove(replica: string, attempt: Attempt): void {
    this.byReplica.get(replica)?.delete(attempt);
  }

  /** Abandons every attempt on `replica` still waiting; returns how many. */
  abandon(replica: string, detail: string): number {
    const set = this.byReplica.get(replica);
    if (!set) return 0;
    const attempts = [...set];
    for (const attempt of attempts) attempt.abandon(detail);
    return attempts.length;
  }

  /** Attempts waiting on `replica` (tests). */
  count(replica: string): number {
    return this.byReplica.get(replica)?.size ?? 0;
  }
}

/**
 * Where the whole SSE events in `data` end: just past its last blank line
 * (a line terminator, CRLF, LF or CR, right after another), 0 if it has
 * none. Scans from the end: an engine's chunk usually ends on a boundary.
 */
export function eventsEnd(data: Buffer): number {
  for (let i = data.length - 1; i >= 1; i--) {
    const c = data[i];
    if (c !== 0x0a && c !== 0x0d) continue;
    if (c === 0x0d && data[i + 1] === 0x0a) continue; // the CR of a CRLF: seen with its LF
    const start = c === 0x0a && data[i - 1] === 0x0d ? i - 1 : i;
    const before = start > 0 ? data[start - 1] : 0;
    if (before === 0x0a || before === 0x0d) return i + 1;
    i = start;
  }
  return 0;
}

/**
 * The engine's headers less the hop-by-hop ones (and on a stream, the length:
 * ours may end differently), then ours, as a flat list (writeHead's cheapest
 * form). Ours win over the engine's and take their place.
 */
function responseHeaders(engine: IncomingHttpHeaders, ours: readonly string[], stream: boolean): (string | string[])[] {
  const out: (string | string[])[] = [];
  const connection = engine.connection;
  // Names the engine's Connection header lists are hop-by-hop too (keep-alive and close name none).
  const listed =
    typeof connection === 'string' && connection !== 'keep-alive' && connection !== 'close'
      ? connection
          .toLowerCase()
          .split(',')
          .map((s) => s.trim())
      : undefined;
  let placed = 0; // bit i: ours[2i] went out in the engine's place
  for (const name in engine) {
    const value = engine[name];
    if (value === undefined || HOP_BY_HOP.has(name) || (stream && name === 'content-length') || listed?.includes(name)) continue;
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
