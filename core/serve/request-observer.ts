// Watchers of routed requests that never act on them: the shadow policy and
// the traffic recorder (core/shadow/). The proxy calls them synchronously;
// they must return at once (anything costly goes to setImmediate) and a
// throw is caught and logged, never the request's problem.
import type { Decision } from '../decide/decision.ts';
import type { RequestFacts } from '../facts/request-facts.ts';
import type { Generation } from '../decide/generation.ts';

/** How a request ended, as the proxy saw it. */
export interface RequestEnd {
  /** ok, engine_error, aborted, broken_stream, upstream_error or rejected (the metric's `outcome`). */
  readonly outcome: string;
  /** The status the client got, when one was sent. */
  readonly status?: number;
  readonly ttfbMs?: number;
  readonly durationMs: number;
  readonly attempts: number;
}

export interface RequestObserver {
  /** Right after the first decision was committed (before any upstream call). */
  decided?(facts: RequestFacts, decision: Decision, snapshot: Generation): void;
  /** The request is over; `decision` is its last one (a retry's, if it was retried). */
  ended?(facts: RequestFacts, decision: Decision, snapshot: Generation, end: RequestEnd): void;
}

/** Calls each observer's `decided`; one that throws is logged and the request goes on. */
export function notifyDecided(
  observers: readonly RequestObserver[],
  log: { warn(fields: object, message: string): void },
  facts: RequestFacts,
  decision: Decision,
  snapshot: Generation,
): void {
  for (const observer of observers) {
    try {
      observer.decided?.(facts, decision, snapshot);
    } catch (error) {
      log.warn({ err: error }, 'a request observer failed (the request is unaffected)');
    }
  }
}

/** Calls each observer's `ended`; one that throws is logged. */
export function notifyEnded(
  observers: readonly RequestObserver[],
  log: { warn(fields: object, message: string): void },
  facts: RequestFacts,
  decision: Decision,
  snapshot: Generation,
  end: RequestEnd,
): void {
  for (const observer of observers) {
    try {
      observer.ended?.(facts, decision, snapshot, end);
    } catch (error) {
      log.warn({ err: error }, 'a request observer failed (the request is unaffected)');
    }
  }
}
