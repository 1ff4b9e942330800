// The JSON body parser: fastify's own (secure-json-parse: prototype
// poisoning refused), plus the two bounds it lacks. A body nested deeper than
// the limit is a 400 here rather than a RangeError when it is serialized for
// the engine; a body in a Content-Encoding the router does not decode is a 415
// rather than gzip bytes misread as text.
import type { FastifyInstance, FastifyRequest } from 'fastify';

export const JSON_TOO_DEEP = 'SWITCHYARD_JSON_TOO_DEEP';
export const UNSUPPORTED_ENCODING = 'SWITCHYARD_UNSUPPORTED_ENCODING';

class BodyError extends Error {
  constructor(
    readonly code: string,
    readonly statusCode: number,
    message: string,
  ) {
    super(message);
  }
}

type Done = (error: Error | null, body?: unknown) => void;

export function registerJsonParser(app: FastifyInstance, maxDepth: number): void {
  const parse = app.getDefaultJsonParser('error', 'error') as (request: FastifyRequest, body: string, done: Done) => void;
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const encoding = request.headers['content-encoding'];
    if (encoding !== undefined && encoding !== 'identity' && encoding !== '') {
      done(new BodyError(UNSUPPORTED_ENCODING, 415, 'The router does not decode Content-Encoding; send the body uncompressed.'));
      return;
    }
    parse(request, body as string, (error, value) => {
      // Nesting N deep takes at least 2N bytes: short bodies need no walk.
      if (error === null && (body as string).length > 2 * maxDepth && nestedDeeper(value, maxDepth)) {
        done(new BodyError(JSON_TOO_DEEP, 400, `The request body is nested deeper than ${maxDepth} levels.`));
        return;
      }
      done(error, value);
    });
  });
}

/** True when arrays/objects nest more than `levels` deep. Recursion stops at the limit, so the stack is bounded. */
export function nestedDeeper(value: unknown, levels: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (levels === 0) return true;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (typeof item === 'object' && item !== null && nestedDeeper(item, levels - 1)) return true;
    }
    return false;
  }
  for (const key in value) {
    const item = (value as Record<string, unknown>)[key];
    if (typeof item === 'object' && item !== null && nestedDeeper(item, levels - 1)) return true;
  }
  return false;
}
