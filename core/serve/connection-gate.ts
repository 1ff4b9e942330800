// What one client may hold of the public listener, judged before fastify
// sees a request (docs/reliability.md, "Floods"): connections per client
// address (the global cap alone lets one client take every slot), requests
// waiting on one connection (HTTP/1.1 pipelining: node parses a whole buffer
// of pipelined requests in one go), and requests per second on one
// connection. Past a bound the connection is closed: a client that floods
// one connection has no answer it is waiting for that it could use.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export interface ConnectionBounds {
  /** Open connections from one client address at most. */
  readonly maxConnectionsPerClient: number;
  /** Requests received on one connection and not yet answered, at most. */
  readonly maxPipelinedRequests: number;
  /** Requests per second on one connection (a token bucket holding one second's worth). */
  readonly maxRequestsPerConnectionPerSecond: number;
}

export interface GateEvents {
  /** A connection was closed for a bound: `bound` names it. At most once per connection. */
  closed(bound: 'connections_per_client' | 'pipelined_requests' | 'request_rate', remoteAddress: string | undefined): void;
}

interface ConnectionState {
  pending: number;
  tokens: number;
  refilledAt: number;
}

const STATE = Symbol('switchyard.connection');
/**
 * A client address that broke the pipelining or rate bound has its new
 * connections closed at once for this long: reconnecting and flooding again
 * would otherwise cost a parse of a full socket read each time.
 */
const PENALTY_MS = 2000;
/** Addresses in the penalty box at most (the oldest leave first). */
const MAX_PENALIZED = 10_000;

/**
 * Installs the gate on `server`: counts connections per address as they are
 * accepted, and wraps the server's request listeners (fastify's) so that a
 * request over a bound never reaches them.
 */
export function installConnectionGate(server: Server, bounds: ConnectionBounds, events: GateEvents): void {
  const perAddress = new Map<string, number>();
  const penalized = new Map<string, number>();
  const penalize = (address: string) => {
    penalized.delete(address);
    if (penalized.size >= MAX_PENALIZED) penalized.delete(penalized.keys().next().value!);
    penalized.set(address, performance.now() + PENALTY_MS);
  };
  const inPenalty = (address: string): boolean => {
    const until = penalized.get(address);
    if (until === undefined) return false;
    if (performance.now() < until) return true;
    penalized.delete(address);
    return false;
  };
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    if (inPenalty(address)) {
      socket.destroy();
      return;
    }
    const open = (perAddress.get(address) ?? 0) + 1;
    if (open > bounds.maxConnectionsPerClient) {
      events.closed('connections_per_client', socket.remoteAddress);
      socket.destroy();
      return;
    }
    perAddress.set(address, open);
    (socket as GatedSocket)[STATE] = { pending: 0, tokens: bounds.maxRequestsPerConnectionPerSecond, refilledAt: performance.now() };
    socket.once('close', () => {
      const left = (perAddress.get(address) ?? 1) - 1;
      if (left <= 0) perAddress.delete(address);
      else perAddress.set(address, left);
    });
  });

  const rate = bounds.maxRequestsPerConnectionPerSecond;
  /** Counts one more request on `socket`; false (and the connection closed) past a bound. */
  const admit = (socket: GatedSocket): boolean => {
    if (socket.destroyed) return false; // closed by the gate while node still parses its buffer
    const state = socket[STATE];
    if (!state) return true;
    // The client's other connections too: opened before its penalty, each
    // would otherwise still get its own pipelined burst parsed.
    if (penalized.size > 0 && inPenalty(socket.remoteAddress ?? '')) {
      socket.destroy();
      return false;
    }
    const now = performance.now();
    state.tokens = Math.min(rate, state.tokens + ((now - state.refilledAt) * rate) / 1000);
    state.refilledAt = now;
    let bound: 'pipelined_requests' | 'request_rate' | undefined;
    if (state.pending >= bounds.maxPipelinedRequests) bound = 'pipelined_requests';
    else if (state.tokens < 1) bound = 'request_rate';
    if (!bound) {
      state.tokens -= 1;
      return true;
    }
    events.closed(bound, socket.remoteAddress);
    penalize(socket.remoteAddress ?? '');
    socket.destroy();
    return false;
  };

  // The check runs where node's parser hands over a request head, before node
  // builds its response object or queues the request: past a bound, the
  // parser is told to stop there (the rest of the buffer is never parsed), so
  // a 64 KiB read of pipelined requests costs one request, not ~1,700 (each
  // of which node would also abort with an error and a formatted stack trace
  // when the socket closes). Where that hook is missing, the request listener
  // below does the check, later and dearer.
  server.on('connection', (socket: GatedSocket) => {
    if (socket.destroyed || !socket[STATE]) return;
    const parser = socket.parser;
    const onIncoming = parser?.onIncoming;
    if (!parser || typeof onIncoming !== 'function') return;
    socket[HOOKED] = true;
    // node calls it with (request, shouldKeepAlive): named parameters, not a rest array per request.
    parser.onIncoming = function gatedOnIncoming(this: unknown, incoming: unknown, keepAlive: unknown) {
      if (!admit(socket)) return STOP_PARSING;
      return onIncoming.call(this, incoming, keepAlive);
    };
  });

  const handlers = server.listeners('request') as ((req: IncomingMessage, res: ServerResponse) => void)[];
  server.removeAllListeners('request');
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket as GatedSocket;
    if (!socket[HOOKED] && !admit(socket)) return void stopParsing(socket);
    if (socket.destroyed) return;
    const state = socket[STATE];
    if (state) {
      state.pending++;
      (res as GatedResponse)[STATE] = state;
      res.on('close', answered); // one shared listener: no closure, and no once() wrapper, per request
    }
    for (const handler of handlers) handler.call(server, req, res);
  });
}

/** A response's 'close': its request no longer waits on the connection. */
function answered(this: GatedResponse): void {
  const state = this[STATE];
  if (state === undefined) return;
  this[STATE] = undefined; // 'close' comes once; counted once all the same
  state.pending--;
}

type GatedResponse = ServerResponse & { [STATE]?: ConnectionState };
type GatedSocket = Socket & {
  [STATE]?: ConnectionState;
  [HOOKED]?: boolean;
  parser?: { onIncoming?: ((...args: unknown[]) => unknown) | null; pause?: () => void } | null;
};
const HOOKED = Symbol('switchyard.connection.hooked');
/**
 * What node's request parser callback returns to llhttp to mean "no body,
 * and stop parsing this buffer here" (the value it uses for an upgrade).
 */
const STOP_PARSING = 2;

/**
 * Stops node's HTTP parser in the middle of the buffer it is executing:
 * destroying the socket alone stops further reads, but the requests already
 * read (a 64 KiB read holds some 1,700 pipelined GETs, and node reads a
 * socket up to 32 times in a row) would each still be parsed and emitted.
 * The parser is node's internal llhttp binding; if a node version lacks it,
 * only this shortcut is lost.
 */
function stopParsing(socket: GatedSocket): void {
  const parser = socket.parser;
  if (typeof parser?.pause === 'function') parser.pause();
}
