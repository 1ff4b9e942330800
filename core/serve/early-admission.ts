// Checks that run on a request's head, before its body is read
// (docs/reliability.md, "Floods"): an unknown or missing API key is a 401
// that never costs a read or a parse, and large bodies being received at
// once are bounded per client address and per tenant, so that a few clients
// cannot keep the event loop parsing multi-MB bodies. The key's hash is kept
// for the request's facts: hashed once, and a header value seen recently is
// not hashed again (core/facts/api-key.ts keeps a bounded memo of digests).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { resolveTenant } from '../decide/decide.ts';
import { errorBody, rejection, type Rejection } from '../errors.ts';
import { bearerKeyHash } from '../facts/api-key.ts';
import type { Generation } from '../decide/generation.ts';
import { rejectionHeaders } from './rejections.ts';

export interface LargeBodyBounds {
  readonly largeBodyBytes: number;
  readonly maxLargeBodiesPerClient: number;
  readonly maxLargeBodiesPerTenant: number;
}

/** The API key's SHA-256 (hex), set by the hook when the request carried a well-formed key. */
export const API_KEY_HASH = Symbol('switchyard.apiKeyHash');
type Marked = FastifyRequest & { [API_KEY_HASH]?: string };

export function apiKeyHashOf(request: FastifyRequest): string | undefined {
  return (request as Marked)[API_KEY_HASH];
}

/** Counts per key, removed at zero: bounded by what is in flight. */
class Counts {
  private readonly counts = new Map<string, number>();
  get(key: string): number {
    return this.counts.get(key) ?? 0;
  }
  add(key: string, n: number): void {
    const value = this.get(key) + n;
    if (value <= 0) this.counts.delete(key);
    else this.counts.set(key, value);
  }
}

function send(request: FastifyRequest, reply: FastifyReply, r: Rejection): FastifyReply {
  // The body is not wanted: close rather than read it all to keep the connection.
  const bodyPending =
    request.headers['content-length'] !== undefined ? request.headers['content-length'] !== '0' : request.headers['transfer-encoding'] !== undefined;
  const headers = rejectionHeaders(r, request.id);
  if (bodyPending) headers.connection = 'close';
  return reply.code(r.status).headers(headers).send(errorBody(r));
}

/** The onRequest hook of the routes that take a body and a key. */
export function earlyAdmission(current: () => Generation, bounds: LargeBodyBounds, onRefused: (request: FastifyRequest, r: Rejection) => void) {
  const byClient = new Counts();
  const byTenant = new Counts();
  const refuse = (request: FastifyRequest, reply: FastifyReply, r: Rejection) => {
    onRefused(request, r);
    return send(request, reply, r);
  };
  // A callback hook, not an async one: an async hook costs a promise and a microtask turn on every request.
  // A refusal answers and never calls done(): fastify goes no further.
  return function check(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
    const snapshot = current();
    const authorization = request.headers.authorization;
    let hash: string | undefined;
    if (authorization !== undefined && authorization !== '') {
      hash = bearerKeyHash(authorization);
      if (hash === undefined) return void refuse(request, reply, rejection('invalid_api_key', 'The Authorization header must be "Bearer <api key>".'));
      (request as Marked)[API_KEY_HASH] = hash;
    }
    const who = resolveTenant(snapshot, hash);
    if (!who.ok) return void refuse(request, reply, who.rejection);
    const tenant = who.value;

    const length = request.headers['content-length'];
    const large = length === undefined ? request.headers['transfer-encoding'] !== undefined : Number(length) > bounds.largeBodyBytes;
    if (!large) return done();
    const client = request.socket.remoteAddress ?? '';
    if (byClient.get(client) >= bounds.maxLargeBodiesPerClient || byTenant.get(tenant.id) >= bounds.maxLargeBodiesPerTenant) {
      const perClient = byClient.get(client) >= bounds.maxLargeBodiesPerClient;
      return void refuse(
        request,
        reply,
        rejection(
          'too_many_large_bodies',
          `Too many large request bodies (over ${bounds.largeBodyBytes} bytes) are being received at once from this ${perClient ? 'client address' : 'tenant'} (at most ${perClient ? bounds.maxLargeBodiesPerClient : bounds.maxLargeBodiesPerTenant}). Send them one after another, or retry after 1 s.`,
          { retryAfterS: 1 },
        ),
      );
    }
    byClient.add(client, 1);
    byTenant.add(tenant.id, 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      byClient.add(client, -1);
      byTenant.add(tenant.id, -1);
    };
    // Received and parsed (the body is whole once 'end' fires; the parse follows at once), or gone.
    request.raw.once('end', () => setImmediate(release));
    request.raw.once('close', release);
    reply.raw.once('close', release);
    done();
  };
}
