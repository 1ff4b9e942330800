// A routed request's lifecycle, published once per event: decided, attempt
// started, attempt ended, finished. The router's own watchers (metrics, the
// log line, tracing, the decision log, the shadow policy and the traffic
// recorder: request-subscribers.ts) subscribe to the router's lifecycle; the
// same messages go to node:diagnostics_channel, as undici's and fastify's do,
// for outside instrumentation (docs/observability.md lists the channels and
// their messages). Watchers never act on a request: one that throws is logged
// and the request goes on.
import diagnostics_channel from 'node:diagnostics_channel';
import type { FastifyRequest } from 'fastify';
import type { Admitted, Decision, Rejected } from '../decide/decision.ts';
import type { Generation } from '../decide/generation.ts';
import type { RequestFacts } from '../facts/request-facts.ts';
import type { Endpoint } from '../facts/request-schemas.ts';
import type { AttemptResult } from './forward.ts';

/** The diagnostics_channel names, one per event. */
export const REQUEST_CHANNELS = {
  decided: 'switchyard:request:decided',
  attemptStarted: 'switchyard:request:attempt:start',
  attemptEnded: 'switchyard:request:attempt:end',
  finished: 'switchyard:request:finished',
} as const;

/** A decision was made and committed: the request's first, or a retry's (before any upstream call of that attempt). */
export interface RequestDecided {
  readonly request: FastifyRequest;
  readonly endpoint: Endpoint;
  /** The route's path (`/v1/chat/completions`), also the upstream path. */
  readonly path: string;
  /** Absent when the request check refused the request before its facts were read. */
  readonly facts?: RequestFacts;
  readonly decision: Decision;
  readonly generation: Generation;
  /** A retry's decision, after an attempt failed before its first byte. */
  readonly retry: boolean;
  /** For a retry: the decision the failed attempt went on. */
  readonly previous?: Admitted;
  /** When the request arrived and when it was decided, on performance.now(). */
  readonly startedAt: number;
  readonly decidedAt: number;
  /** Time spent deciding, without any wait for a shared quota store. */
  readonly decisionMs: number;
}

/** An upstream attempt is about to be sent. */
export interface AttemptStarted {
  readonly request: FastifyRequest;
  readonly endpoint: Endpoint;
  readonly decision: Admitted;
  /** 1 for the first attempt. */
  readonly attempt: number;
  readonly replicaUrl: string;
  readonly maxTokens?: number;
  /**
   * The trace context sent to the engine: a subscriber that traces sets it
   * (W3C traceparent, tracestate); left unset, the client's own goes on.
   */
  traceHeaders?: Record<string, string>;
}

/** An upstream attempt is over: answered (`done`), broken mid-stream, failed before its first byte (`retryable`), or given up by the client. */
export interface AttemptEnded {
  readonly request: FastifyRequest;
  readonly decision: Admitted;
  readonly attempt: number;
  readonly result: AttemptResult;
  /** From sending to the end of the attempt. */
  readonly durationMs: number;
}

/** The request is over: its response was sent, or the client went away. */
export interface RequestFinished {
  readonly request: FastifyRequest;
  readonly endpoint: Endpoint;
  readonly facts?: RequestFacts;
  readonly generation: Generation;
  /** The last decision the request went on (its last admitted one, when it was admitted); a rejection when it never was. */
  readonly decision: Decision;
  /** Set when the router answered the client with a rejection of its own (the first decision's, or no replica left to retry on). */
  readonly refusal?: Rejected;
  /** ok, engine_error, aborted, broken_stream, upstream_error or rejected (the metric's `outcome`). */
  readonly outcome: string;
  /** The status the client got, when one was sent. */
  readonly status?: number;
  readonly attempts: number;
  readonly retried: boolean;
  readonly ttfbMs?: number;
  readonly durationMs: number;
  /** What the engine's usage settled against the tenant's token quota (settle-usage.ts), when it did. */
  readonly usage?: unknown;
  /** Why the last attempt failed, when it did (connect, timeout, status_5xx, …). */
  readonly failure?: string;
}

export interface RequestSubscriber {
  decided?(message: RequestDecided): void;
  attemptStarted?(message: AttemptStarted): void;
  attemptEnded?(message: AttemptEnded): void;
  finished?(message: RequestFinished): void;
}

type Event = keyof RequestSubscriber;

const channels = {
  decided: diagnostics_channel.channel(REQUEST_CHANNELS.decided),
  attemptStarted: diagnostics_channel.channel(REQUEST_CHANNELS.attemptStarted),
  attemptEnded: diagnostics_channel.channel(REQUEST_CHANNELS.attemptEnded),
  finished: diagnostics_channel.channel(REQUEST_CHANNELS.finished),
} as const;

/** One router's lifecycle: its subscribers in order, then the process-wide channels. */
export class RequestLifecycle {
  readonly #decided: ((m: RequestDecided) => void)[] = [];
  readonly #attemptStarted: ((m: AttemptStarted) => void)[] = [];
  readonly #attemptEnded: ((m: AttemptEnded) => void)[] = [];
  readonly #finished: ((m: RequestFinished) => void)[] = [];

  constructor(private readonly log: { warn(fields: object, message: string): void }) {}

  subscribe(subscriber: RequestSubscriber): void {
    if (subscriber.decided) this.#decided.push(subscriber.decided.bind(subscriber));
    if (subscriber.attemptStarted) this.#attemptStarted.push(subscriber.attemptStarted.bind(subscriber));
    if (subscriber.attemptEnded) this.#attemptEnded.push(subscriber.attemptEnded.bind(subscriber));
    if (subscriber.finished) this.#finished.push(subscriber.finished.bind(subscriber));
  }

  decided(message: RequestDecided): void {
    this.#publish('decided', this.#decided, message);
  }

  attemptStarted(message: AttemptStarted): void {
    this.#publish('attemptStarted', this.#attemptStarted, message);
  }

  attemptEnded(message: AttemptEnded): void {
    this.#publish('attemptEnded', this.#attemptEnded, message);
  }

  finished(message: RequestFinished): void {
    this.#publish('finished', this.#finished, message);
  }

  #publish<M>(event: Event, subscribers: readonly ((m: M) => void)[], message: M): void {
    for (let i = 0; i < subscribers.length; i++) {
      try {
        subscribers[i](message);
      } catch (error) {
        this.log.warn({ err: error, event }, 'a request subscriber failed (the request is unaffected)');
      }
    }
    // Node catches an outside subscriber's throw and reports it as an uncaught exception (its rule for every channel).
    const channel = channels[event];
    if (channel.hasSubscribers) channel.publish(message);
  }
}
