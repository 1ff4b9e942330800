// Passive health (Envoy-style outlier detection): what the proxy's own
// requests say about a replica. Consecutive failures eject it for a back-off
// that grows with each ejection; once the back-off is over, a passing active
// health check brings it back. No I/O and no clock of its own: the fleet
// passes `now` in.

/** How one proxied attempt on a replica ended, as far as the replica's health goes. */
export type UpstreamOutcome =
  /** A response below 500 that ended normally. */
  | 'success'
  /** The engine answered 5xx. */
  | 'status_5xx'
  /** No connection (refused, unreachable, connect timeout). */
  | 'connect'
  /** No response headers, or a silent stream, within the pool's timeouts. */
  | 'timeout'
  /** A connection reset or closed early, or bytes that are not HTTP. */
  | 'protocol'
  /** No first byte while the pool's other replicas answered: past the deadline their latency sets, or until the client gave up. */
  | 'silence';

/** Outcomes that say the replica itself is unwell (Envoy's "gateway failures"): every failure but a 5xx (a silence included). */
export type GatewayFailure = Exclude<UpstreamOutcome, 'success' | 'status_5xx'>;

/** A pool's outlier detection settings (`outlier_detection` in the policy; docs/reliability.md gives the reasons). */
export interface OutlierSettings {
  /** Consecutive failed attempts of any kind (5xx included) that eject. */
  readonly consecutive5xx: number;
  /** Consecutive connect errors, timeouts or broken connections that eject. */
  readonly consecutiveGatewayFailures: number;
  /** An ejection lasts base × (number of recent ejections), capped at max. */
  readonly baseEjectionMs: number;
  readonly maxEjectionMs: number;
  /** At most this share of a pool is ejected at once (at least one replica always may be). */
  readonly maxEjectionPercent: number;
  /** Below this share of a pool in rotation, ejected replicas are routed to again rather than reject everything. */
  readonly panicThresholdPercent: number;
}

export const OUTLIER_DEFAULTS: OutlierSettings = Object.freeze({
  consecutive5xx: 5,
  consecutiveGatewayFailures: 3,
  baseEjectionMs: 30_000,
  maxEjectionMs: 300_000,
  maxEjectionPercent: 50,
  panicThresholdPercent: 50,
});

/** Why a replica is (or was last) ejected: `/admin/state` shows it. */
export interface Ejection {
  /** The outcome that reached a threshold. */
  readonly cause: Exclude<UpstreamOutcome, 'success'>;
  /** The last failure's own words (engine status, error code and message). */
  readonly detail: string;
  readonly ejectedAt: number;
  /** Eligible to return from this time on, at its next passing health check. */
  readonly until: number;
  /** This ejection's multiplier of the base time. */
  readonly multiplier: number;
}

export class OutlierDetector {
  private failures = 0;
  private gatewayFailures = 0;
  private current: Ejection | undefined;
  /** Recent ejections: decays by one per base interval spent back in rotation. */
  private ejections = 0;
  private returnedAt = 0;

  get ejection(): Ejection | undefined {
    return this.current;
  }

  get consecutiveFailures(): number {
    return this.failures;
  }

  get consecutiveGatewayFailures(): number {
    return this.gatewayFailures;
  }

  /**
   * Counts one outcome. Returns true when a threshold is reached and the
   * replica, not yet ejected, should be (the fleet checks the pool's cap).
   * A success on a clean record returns at once: this runs for every request.
   */
  record(outcome: UpstreamOutcome, settings: OutlierSettings): boolean {
    if (outcome === 'success') {
      this.failures = 0;
      this.gatewayFailures = 0;
      return false;
    }
    this.failures++;
    if (outcome !== 'status_5xx') this.gatewayFailures++;
    if (this.current) return false;
    return this.failures >= settings.consecutive5xx || this.gatewayFailures >= settings.consecutiveGatewayFailures;
  }

  /** Ejects for base × recent ejections (capped); the counts start over. */
  eject(cause: Ejection['cause'], detail: string, now: number, settings: OutlierSettings): Ejection {
    const decayed = Math.floor(Math.max(0, now - this.returnedAt) / settings.baseEjectionMs);
    this.ejections = Math.max(0, this.ejections - decayed) + 1;
    const duration = Math.min(settings.baseEjectionMs * this.ejections, Math.max(settings.maxEjectionMs, settings.baseEjectionMs));
    this.current = { cause, detail, ejectedAt: now, until: now + duration, multiplier: this.ejections };
    this.failures = 0;
    this.gatewayFailures = 0;
    return this.current;
  }

  /** A passing active health check: back in rotation once the back-off is over. Returns the ejection it ended. */
  healthy(now: number): Ejection | undefined {
    const ended = this.current;
    if (!ended || now < ended.until) return undefined;
    this.current = undefined;
    this.returnedAt = now;
    return ended;
  }
}
