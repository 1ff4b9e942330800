// Sends a rejection the way OpenAI clients expect it: the status, an
// OpenAI-shaped body, x-switchyard-reject-reason, and Retry-After on 429/503.
import type { ServerResponse } from 'node:http';
import { errorBody, type Rejection } from '../errors.ts';

/** Longer than this (openai's own cap on honouring Retry-After), a client's automatic retry is pointless. */
export const MAX_RETRY_WORTH_WAITING_S = 60;

export function rejectionHeaders(r: Rejection, requestId: string): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json; charset=utf-8',
    'x-request-id': requestId,
    'x-switchyard-reject-reason': r.code,
  };
  if (r.retryAfterS !== undefined && (r.status === 429 || r.status === 503)) {
    headers['retry-after'] = String(r.retryAfterS);
    // SDKs retry within seconds whatever a long Retry-After says; openai's and LlamaIndex's stop on this.
    if (r.retryAfterS > MAX_RETRY_WORTH_WAITING_S) headers['x-should-retry'] = 'false';
  }
  return headers;
}

/** Writes the rejection on a raw response (the proxy path hijacks fastify's reply). */
export function writeRejection(res: ServerResponse, r: Rejection, requestId: string, extraHeaders: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(errorBody(r));
  res.writeHead(r.status, { ...rejectionHeaders(r, requestId), ...extraHeaders, 'content-length': String(Buffer.byteLength(body)) });
  res.end(body);
}

/** One SSE event carrying an OpenAI-shaped error: how a stream ends once its first byte has gone out. */
export function sseErrorEvent(r: Pick<Rejection, 'message' | 'type' | 'code'>): string {
  return `data: ${JSON.stringify(errorBody(r))}\n\n`;
}
