// Errors on /v1/messages in the shape Anthropic's clients read:
// {"type":"error","error":{"type","message"}}, with Anthropic's error type
// for the status. Status, Retry-After and x-switchyard-reject-reason are as
// on every other route.
import type { ServerResponse } from 'node:http';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { Rejection } from '../errors.ts';
import { toRejection } from './http-errors.ts';
import { rejectionHeaders } from './rejections.ts';

const TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  503: 'overloaded_error',
};

export function anthropicErrorBody(r: Pick<Rejection, 'status' | 'message'>): { type: 'error'; error: { type: string; message: string } } {
  return { type: 'error', error: { type: TYPES[r.status] ?? (r.status < 500 ? 'invalid_request_error' : 'api_error'), message: r.message } };
}

export function writeAnthropicRejection(res: ServerResponse, r: Rejection, requestId: string, extraHeaders: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(anthropicErrorBody(r));
  res.writeHead(r.status, { ...rejectionHeaders(r, requestId), ...extraHeaders, 'content-length': String(Buffer.byteLength(body)) });
  res.end(body);
}

/** How an Anthropic stream ends once its first byte has gone out: an `error` event. */
export function anthropicErrorEvent(r: Pick<Rejection, 'status' | 'message'>): string {
  return `event: error\ndata: ${JSON.stringify(anthropicErrorBody(r))}\n\n`;
}

/** Fastify's errors before the route runs (bad JSON, a failed body schema) on /v1/messages; `refused` records a 4xx as every route does. */
export function anthropicErrorHandler(refused: (request: FastifyRequest, r: Rejection) => void) {
  return (error: FastifyError, request: FastifyRequest, reply: FastifyReply): void => {
    const r = toRejection(error, request.routeOptions?.bodyLimit);
    if (r.status >= 500) request.log.error({ err: error }, 'unhandled error');
    reply.code(r.status).headers(rejectionHeaders(r, request.id)).send(anthropicErrorBody(r));
    if (r.status < 500) refused(request, r);
  };
}
