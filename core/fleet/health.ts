// A replica's health from the answers to its health checks (and from the
// proxy's connect errors): a small state machine with hysteresis, so that one
// slow answer does not pull a replica and one good answer does not bring a
// broken one back.
import type { ReplicaHealth } from './types.ts';

/**
 * What one check found:
 * - `ok`: a 2xx answer;
 * - `unready`: an answer that is not 2xx (vLLM and SGLang say 503 while
 *   loading or when their engine died);
 * - `error`: no answer: connection refused or reset, timeout.
 */
export type CheckOutcome = 'ok' | 'unready' | 'error';

/** Health before draining is applied: draining is an operator's flag, not a finding. */
export type ProbedHealth = Exclude<ReplicaHealth, 'draining'>;

export interface HealthPolicy {
  /** Consecutive failures that turn a replica `failing`. */
  readonly failAfter: number;
  /** Consecutive successes that bring a `failing` replica back. */
  readonly recoverAfter: number;
}

export interface HealthChange {
  readonly from: ProbedHealth;
  readonly to: ProbedHealth;
}

export class HealthTracker {
  private state: ProbedHealth = 'unknown';
  private failures = 0;
  private successes = 0;
  private everReady = false;

  constructor(private readonly policy: HealthPolicy) {}

  get health(): ProbedHealth {
    return this.state;
  }

  get consecutiveFailures(): number {
    return this.failures;
  }

  get consecutiveSuccesses(): number {
    return this.successes;
  }

  /** Records one outcome; returns the change it caused, if any. */
  observe(outcome: CheckOutcome): HealthChange | undefined {
    const from = this.state;
    if (outcome === 'ok') {
      this.failures = 0;
      this.successes++;
      // Only a replica that failed has to prove itself: a fresh or loading one
      // that answers 200 has simply come up.
      if (from !== 'failing' || this.successes >= this.policy.recoverAfter) this.state = 'ready';
      if (this.state === 'ready') this.everReady = true;
    } else if (outcome === 'unready' && !this.everReady) {
      // Answering but never yet ready: still loading, not broken.
      this.failures = 0;
      this.successes = 0;
      this.state = 'not_ready';
    } else {
      // No answer, or a replica that served before now says it cannot
      // (vLLM's 503 after its engine died).
      this.successes = 0;
      this.failures++;
      if (this.failures >= this.policy.failAfter) this.state = 'failing';
    }
    return this.state === from ? undefined : { from, to: this.state };
  }
}
