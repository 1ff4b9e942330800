// multipart/form-data bodies (the audio routes, as OpenAI's and vLLM's
// clients send them): the raw bytes are kept to be forwarded as they came,
// and the form's short text fields (model, prompt, language, ...) are read
// out for the decision. Linear scans with indexOf, bounded sizes: the file
// part is never decoded or copied.
import type { FastifyInstance, FastifyRequest } from 'fastify';

/** The bytes as received, with their Content-Type (boundary included): what goes upstream. */
export const RAW_BODY = Symbol('raw multipart body');
export interface MultipartBody {
  [key: string]: unknown;
  [RAW_BODY]: { readonly bytes: Buffer; readonly contentType: string };
}

/** Text fields longer than this are not read (a prompt for a transcription is a few hundred characters). */
const MAX_FIELD_BYTES = 64 * 1024;
const MAX_PARTS = 64;
const BOOLEAN_FIELDS = new Set(['stream']);

class MultipartError extends Error {
  readonly statusCode = 400;
  readonly code = 'SWITCHYARD_BAD_MULTIPART';
}

function boundaryOf(contentType: string): string | undefined {
  for (const param of contentType.split(';').slice(1, 16)) {
    const eq = param.indexOf('=');
    if (eq < 0 || param.slice(0, eq).trim().toLowerCase() !== 'boundary') continue;
    let value = param.slice(eq + 1).trim();
    if (value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    return value.length >= 1 && value.length <= 70 ? value : undefined;
  }
  return undefined;
}

/** The form's text fields (parts without a filename), by name. Throws MultipartError on a malformed body. */
export function multipartFields(bytes: Buffer, contentType: string): Record<string, unknown> {
  const boundary = boundaryOf(contentType);
  if (!boundary) throw new MultipartError('The multipart body has no boundary in its Content-Type. Send it as multipart/form-data with a boundary.');
  const delimiter = Buffer.from(`--${boundary}`);
  const fields: Record<string, unknown> = {};
  let at = bytes.indexOf(delimiter);
  if (at < 0) throw new MultipartError('The multipart body holds no part. Send the form fields (file, model) as multipart/form-data.');
  for (let parts = 0; parts < MAX_PARTS; parts++) {
    const start = at + delimiter.length;
    if (bytes[start] === 0x2d && bytes[start + 1] === 0x2d) return fields; // --boundary--: the end
    const headEnd = bytes.indexOf('\r\n\r\n', start);
    if (headEnd < 0 || headEnd - start > 4096) throw new MultipartError('A multipart part has no well-formed headers.');
    const next = bytes.indexOf(delimiter, headEnd + 4);
    if (next < 0) throw new MultipartError('The multipart body is not closed by its boundary.');
    const head = bytes.toString('latin1', start, headEnd);
    const name = /\bname="([^"\r\n]{1,64})"/i.exec(head)?.[1];
    const isFile = /\bfilename="/i.test(head);
    const valueEnd = next - 2; // the CRLF before the delimiter
    if (name && !isFile && valueEnd - (headEnd + 4) <= MAX_FIELD_BYTES && !(name in fields)) {
      const value = bytes.toString('utf8', headEnd + 4, Math.max(headEnd + 4, valueEnd));
      fields[name] = BOOLEAN_FIELDS.has(name) ? value === 'true' : value;
    }
    at = next;
  }
  throw new MultipartError(`The multipart body has more than ${MAX_PARTS} parts.`);
}

/** The form with text field `name` set to `value` (the field is added when missing); the other parts' bytes as they were. */
export function replaceField(bytes: Buffer, contentType: string, name: string, value: string): Buffer {
  const delimiter = Buffer.from(`--${boundaryOf(contentType)}`);
  const part = Buffer.from(`\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`);
  const kept: Buffer[] = [];
  let at = bytes.indexOf(delimiter);
  const first = at;
  for (let parts = 0; parts < MAX_PARTS && at >= 0; parts++) {
    const start = at + delimiter.length;
    if (bytes[start] === 0x2d && bytes[start + 1] === 0x2d) break;
    const headEnd = bytes.indexOf('\r\n\r\n', start);
    const next = bytes.indexOf(delimiter, headEnd + 4);
    if (headEnd < 0 || next < 0) break;
    const head = bytes.toString('latin1', start, headEnd);
    if (/\bname="([^"\r\n]{1,64})"/i.exec(head)?.[1] !== name) kept.push(bytes.subarray(at, next));
    at = next;
  }
  return Buffer.concat([bytes.subarray(0, first), delimiter, part, ...kept, bytes.subarray(at)]);
}

/** Accepts multipart/form-data on the routes that take it, within `bodyLimit`. */
export function registerMultipartParser(app: FastifyInstance, bodyLimit: number): void {
  app.addContentTypeParser('multipart/form-data', { parseAs: 'buffer', bodyLimit }, (request: FastifyRequest, bytes: Buffer, done) => {
    try {
      const contentType = request.headers['content-type']!;
      const body = multipartFields(bytes, contentType) as MultipartBody;
      body[RAW_BODY] = { bytes, contentType };
      done(null, body);
    } catch (error) {
      done(error as Error);
    }
  });
}
