// The JSON body parser: JSON.parse, behind a linear pre-scan of the text that
// bounds what it may be asked to build. A key named `__proto__` (a tool
// schema may have a property of that name: valid JSON) is accepted: JSON.parse
// makes it an own data property, never a prototype, and the router copies
// bodies only by spread and JSON.stringify, which keep it data, so it reaches
// the engine as sent. Deep nesting (10,000 levels is a
// RangeError when the body is serialized for the engine) and millions of
// tiny values (8 MB of `[],` is seconds of JSON.parse on the event loop) are
// a 400 before any parse. A body in a Content-Encoding the router does not
// decode is a 415 rather than gzip bytes misread as text. The bytes as
// received are kept beside the parsed body (rawJsonOf): what goes to the
// engine is the client's bytes, edited in place (json-splice.ts), not the
// body serialized again.
import { isUtf8 } from 'node:buffer';
import type { FastifyInstance } from 'fastify';
import { inTurnOfItsOwn } from './body-turns.ts';

export const JSON_TOO_COMPLEX = 'SWITCHYARD_JSON_TOO_COMPLEX';
export const UNSUPPORTED_ENCODING = 'SWITCHYARD_UNSUPPORTED_ENCODING';

export interface JsonBounds {
  /** Deepest nesting of arrays and objects. */
  readonly maxDepth: number;
  /** Most values (array items and object members, counted by their separators and brackets). */
  readonly maxValues: number;
}

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

/**
 * Each parsed JSON body's bytes as the client sent them, on the body itself
 * under a symbol: JSON.stringify, Object.keys, for...in and the schema check
 * never see it. Not a WeakMap: its set() and the ephemeron table every
 * scavenge walks cost ~1.2 µs a body, the property ~0.2 µs (a loop of 150 B
 * bodies, collections included).
 */
const RAW_BYTES = Symbol('switchyard.rawJson');
type WithRawBytes = { [RAW_BYTES]?: Buffer };

/**
 * The bytes `body` was parsed from, when it came through this parser as valid
 * UTF-8 (invalid bytes were read as U+FFFD: only the parsed body says what the
 * router understood, so it is what goes on).
 */
export function rawJsonOf(body: unknown): Buffer | undefined {
  return body !== null && typeof body === 'object' ? (body as WithRawBytes)[RAW_BYTES] : undefined;
}

export function registerJsonParser(app: FastifyInstance, bounds: JsonBounds): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, bytes, done) => {
    const encoding = request.headers['content-encoding'];
    if (encoding !== undefined && encoding !== '' && encoding.toLowerCase() !== 'identity') {
      done(new BodyError(UNSUPPORTED_ENCODING, 415, `The router does not decode Content-Encoding "${encoding.slice(0, 32)}"; send the body uncompressed.`));
      return;
    }
    if ((bytes as Buffer).length < SLICED_BODY_BYTES) return checkAndParse((bytes as Buffer).toString('utf8'), bytes as Buffer, bounds, done);
    // A multi-MB body: decoding, parsing and reading it for the decision are
    // each milliseconds to tens of them. Each runs in a turn of the event
    // loop of its own, one step of one body a turn (body-turns.ts), so other
    // requests get the loop between them however many large bodies arrive at once.
    inTurnOfItsOwn(() => {
      const text = (bytes as Buffer).toString('utf8');
      inTurnOfItsOwn(() => checkAndParse(text, bytes as Buffer, bounds, (error, body) => inTurnOfItsOwn(() => done(error, body))));
    });
  });
}

/** Bodies from this size on are decoded, parsed and routed in separate turns of the event loop, one body's step a turn. */
export const SLICED_BODY_BYTES = 512 * 1024;

function checkAndParse(text: string, bytes: Buffer, bounds: JsonBounds, done: Done): void {
  const problem = jsonComplexity(text, bounds);
  if (problem !== undefined) {
    done(new BodyError(JSON_TOO_COMPLEX, 400, problem));
    return;
  }
  parse(text, bytes, done);
}

function parse(text: string, bytes: Buffer, done: Done): void {
  if (text === '') {
    done(new BodyError('FST_ERR_CTP_EMPTY_JSON_BODY', 400, "Body cannot be empty when content-type is set to 'application/json'"));
    return;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    done(Object.assign(error as Error, { statusCode: 400 }));
    return;
  }
  if (value !== null && typeof value === 'object' && isUtf8(bytes)) (value as WithRawBytes)[RAW_BYTES] = bytes;
  done(null, value);
}

/**
 * Why the JSON text is too deep or has too many values, or undefined. One
 * pass: string contents are skipped with indexOf, so the cost is in the
 * brackets and separators, not in the prompt text. Malformed JSON is left to
 * JSON.parse to report.
 */
export function jsonComplexity(text: string, bounds: JsonBounds): string | undefined {
  const n = text.length;
  // Nesting N deep takes 2N characters, N values about N.
  if (n <= 2 * bounds.maxDepth && n <= bounds.maxValues) return undefined;
  let depth = 0;
  let values = 0;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 34 /* " */) {
      let end = i;
      for (;;) {
        end = text.indexOf('"', end + 1);
        if (end < 0) return undefined;
        let backslash = end - 1;
        while (text.charCodeAt(backslash) === 92) backslash--;
        if ((end - 1 - backslash) % 2 === 0) break; // not escaped
      }
      i = end;
    } else if (c === 91 /* [ */ || c === 123 /* { */) {
      if (++depth > bounds.maxDepth) return `The request body is nested deeper than ${bounds.maxDepth} levels.`;
      if (++values > bounds.maxValues) return `The request body holds more than ${bounds.maxValues} JSON values.`;
    } else if (c === 93 /* ] */ || c === 125 /* } */) {
      depth--;
    } else if (c === 44 /* , */) {
      if (++values > bounds.maxValues) return `The request body holds more than ${bounds.maxValues} JSON values.`;
    }
  }
  return undefined;
}
