// Watchers of routed requests that never act on them: the shadow policy and
// the traffic recorder (core/shadow/). Each is a subscriber of the request
// lifecycle (request-lifecycle.ts): called synchronously, it must return at
// once (anything costly goes to setImmediate); a throw is caught and logged,
// never the request's problem.
import type { Decision } from '../decide/decision.ts';
import type { RequestFacts } from '../facts/request-facts.ts';
import type { Generation } from '../decide/generation.ts';
import type { RequestSubscriber } from './request-lifecycle.ts';

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

/** An observer as a lifecycle subscriber: it hears of requests whose facts were read, their first decision and their end. */
export function observerSubscriber(observer: RequestObserver): RequestSubscriber {
  return {
    decided: (m) => {
      if (m.facts && !m.retry) observer.decided?.(m.facts, m.decision, m.generation);
    },
    finished: (m) => {
      if (!m.facts) return;
      const end: RequestEnd = { outcome: m.outcome, status: m.status, ttfbMs: m.ttfbMs, durationMs: m.durationMs, attempts: m.attempts };
      observer.ended?.(m.facts, m.decision, m.generation, end);
    },
  };
}
