// Errors fastify raises before a route runs — malformed JSON, a failed body
// schema, a body over the limit — answered in OpenAI's shape, never as a 5xx
// or a stack trace.
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { errorBody, rejection, type Rejection } from '../errors.ts';
import { rejectionHeaders } from './rejections.ts';

export function toRejection(error: FastifyError): Rejection {
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return rejection('payload_too_large', 'The request body is larger than this router accepts.');
  }
  if (error.validation) {
    const first = error.validation[0];
    const field = first?.instancePath ? first.instancePath.slice(1).replace(/\//g, '.') : (first?.params as { missingProperty?: string })?.missingProperty;
    const message = first?.keyword === 'required' ? `missing required field "${field}"` : `"${field ?? 'body'}" ${first?.message ?? 'is invalid'}`;
    return rejection('invalid_request', `Invalid request body: ${message}.`, { param: field });
  }
  if (error instanceof SyntaxError || error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || error.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
    return rejection('invalid_request', `The request body is not valid JSON: ${error.message}`);
  }
  if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return rejection('invalid_request', 'Send the body as JSON with "Content-Type: application/json".');
  }
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
    return { ...rejection('invalid_request', error.message), status: error.statusCode };
  }
  return rejection('internal_error', 'The router failed to handle this request.');
}

export function errorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const r = toRejection(error);
  if (r.status >= 500) request.log.error({ err: error }, 'unhandled error');
  reply.code(r.status).headers(rejectionHeaders(r, request.id)).send(errorBody(r));
}

export function notFoundHandler(request: FastifyRequest, reply: FastifyReply): void {
  const r = rejection('route_not_found', `No route ${request.method} ${request.url.split('?')[0]}. The router serves /v1/chat/completions, /v1/completions, /v1/embeddings and /v1/models.`);
  reply.code(404).headers(rejectionHeaders(r, request.id)).send(errorBody(r));
}
