// Errors fastify or node's HTTP parser raise before a route runs — malformed
// JSON, a failed body schema, a body over the limit, a broken request line or
// header, a slow client — answered in OpenAI's shape, never as a 5xx or a
// stack trace.
import type { Socket } from 'node:net';
import type { FastifyBaseLogger, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorBody, rejection, type Rejection } from '../errors.ts';
import { JSON_TOO_COMPLEX, UNSUPPORTED_ENCODING } from './json-body.ts';
import { rejectionHeaders } from './rejections.ts';

/** `bodyLimit`: the route's limit in bytes, named in the 413 so a client knows how far to cut. */
export function toRejection(error: FastifyError, bodyLimit?: number): Rejection {
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    const limit = bodyLimit ? ` (${bodyLimit} bytes, settings body_limit_bytes)` : '';
    return rejection('payload_too_large', `The request body is larger than this router accepts${limit}. Send a shorter prompt, or fewer or smaller images.`);
  }
  if (error.code === JSON_TOO_COMPLEX) return rejection('invalid_request', error.message);
  if (error.code === UNSUPPORTED_ENCODING) return rejection('unsupported_media_type', error.message);
  if (error.validation) {
    const first = error.validation[0];
    const field = first?.instancePath ? first.instancePath.slice(1).replace(/\//g, '.') : (first?.params as { missingProperty?: string })?.missingProperty;
    const message = first?.keyword === 'required' ? `missing required field "${field}"` : `"${field ?? 'body'}" ${first?.message ?? 'is invalid'}`;
    return rejection('invalid_request', `Invalid request body: ${message}.`, { param: field });
  }
  if (error instanceof SyntaxError || error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || error.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
    return rejection(
      'invalid_request',
      `The request body is not valid JSON: ${error.message.replace(/\.$/, '')}. Send the whole body as one JSON object; a body cut short, or a quote or newline left unescaped inside a string, is the usual cause.`,
    );
  }
  if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return rejection('invalid_request', 'Send the body as JSON with "Content-Type: application/json".');
  }
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
    return { ...rejection('invalid_request', error.message), status: error.statusCode };
  }
  return rejection('internal_error', 'The router failed to handle this request.');
}

/** After a 413, at most this much more of the body is read and dropped, so that the client, still uploading, can read the answer (not EPIPE). */
const MAX_DISCARD_BYTES = 64 * 1024 * 1024;
/** Lines about refused requests: at most this many a second per kind (a flood of 404s must not become a flood of log writes). */
const REFUSAL_LINES_PER_SECOND = 20;

/** A per-second budget of log lines; what it drops is counted in the next line that goes out. */
export class LogBudget {
  private windowStart = 0;
  private used = 0;
  private dropped = 0;

  /** undefined: drop this line; else how many were dropped since the last one. */
  take(now = Date.now()): number | undefined {
    if (now - this.windowStart >= 1000) {
      this.windowStart = now;
      this.used = 0;
    }
    if (this.used >= REFUSAL_LINES_PER_SECOND) {
      this.dropped++;
      return undefined;
    }
    this.used++;
    const dropped = this.dropped;
    this.dropped = 0;
    return dropped;
  }
}

const budgets = { request: new LogBudget(), notFound: new LogBudget(), parse: new LogBudget() };

function logRefusal(log: FastifyBaseLogger, budget: LogBudget, fields: Record<string, unknown>, message: string): void {
  const dropped = budget.take();
  if (dropped === undefined) return;
  log.info(dropped > 0 ? { ...fields, linesDropped: dropped } : fields, message);
}

const pathOf = (url: string) => url.split('?')[0].slice(0, 200);

export function errorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const r = toRejection(error, request.routeOptions?.bodyLimit);
  if (r.status >= 500) request.log.error({ err: error }, 'unhandled error');
  else
    logRefusal(
      request.log,
      budgets.request,
      { status: r.status, reject: r.code, method: request.method, path: pathOf(request.url), detail: r.message.slice(0, 200) },
      'refused before routing',
    );
  if (r.status === 413) {
    // The client may still be uploading: read (and drop) a bounded amount so it gets to read this answer, then close.
    reply.header('connection', 'close');
    let discarded = 0;
    const raw = request.raw;
    if (!raw.complete) {
      raw.on('data', (chunk: Buffer) => {
        discarded += chunk.length;
        if (discarded > MAX_DISCARD_BYTES) raw.socket.destroy();
      });
    }
  }
  reply.code(r.status).headers(rejectionHeaders(r, request.id)).send(errorBody(r));
}

export function notFoundHandler(request: FastifyRequest, reply: FastifyReply): void {
  const r = rejection(
    'route_not_found',
    `No route ${request.method} ${request.url.split('?')[0]}. The router serves /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses, /v1/messages, /v1/models and vLLM's other routes (tokenize, rerank, score, pooling, classify, audio; docs/serving.md lists them).`,
  );
  logRefusal(request.log, budgets.notFound, { status: 404, method: request.method, path: pathOf(request.url) }, 'no such route');
  reply.code(404).headers(rejectionHeaders(r, request.id)).send(errorBody(r));
}

/** fastify's router errors (a URL it cannot decode, a path parameter too long): a 400 in OpenAI's shape. */
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const r = rejection('invalid_request', error.code === 'FST_ERR_BAD_URL' ? 'The request URL is malformed.' : error.message);
  reply.code(400).headers(rejectionHeaders(r, request.id)).send(errorBody(r));
}

/**
 * Node's HTTP parser failed on a connection (bad request line, CR/LF or
 * control bytes in a header, a head over max_header_bytes, a client too slow
 * with its head or body): one OpenAI-shaped answer, then the connection goes,
 * since the byte stream can no longer be trusted.
 */
export function clientErrorHandler(this: FastifyInstance | undefined, error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  if (this?.log) logRefusal(this.log, budgets.parse, { code: error.code, remoteAddress: socket.remoteAddress }, 'not valid HTTP; connection closed');
  let r: Rejection;
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT')
    r = rejection('request_timeout', 'The request was not received in time. Send the whole request without pausing, or check the connection.');
  else if (error.code === 'HPE_HEADER_OVERFLOW')
    r = rejection('headers_too_large', 'The request headers are larger than this router accepts (max_header_bytes). Send fewer or shorter headers.');
  else r = rejection('invalid_request', `The request is not valid HTTP (${clientErrorReason(error.code)}).`);
  if (socket.writable && !(socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent) {
    const body = JSON.stringify(errorBody(r));
    socket.write(
      `HTTP/1.1 ${r.status} ${STATUS_TEXT[r.status] ?? 'Bad Request'}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nx-switchyard-reject-reason: ${r.code}\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

const STATUS_TEXT: Record<number, string> = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' };

// llhttp's codes, named for a human; the code itself is the client's only clue.
function clientErrorReason(code: string | undefined): string {
  switch (code) {
    case 'HPE_INVALID_HEADER_TOKEN':
    case 'HPE_INVALID_CONSTANT':
      return 'a header name or value holds a byte HTTP does not allow';
    case 'HPE_LF_EXPECTED':
    case 'HPE_CR_EXPECTED':
      return 'a line is not ended by CR LF';
    case 'HPE_INVALID_METHOD':
      return 'unknown method';
    case 'HPE_INVALID_URL':
      return 'malformed request target';
    case 'HPE_INVALID_CONTENT_LENGTH':
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
      return 'bad Content-Length';
    case 'HPE_INVALID_TRANSFER_ENCODING':
    case 'HPE_INVALID_CHUNK_SIZE':
      return 'bad chunked encoding';
    default:
      return code ?? 'parse error';
  }
}
