// Envoy's retry budget, per pool: retries in progress may be at most a share
// of the pool's requests in flight (or a small fixed number, whichever is
// more). When a whole pool goes bad, every request fails at once; without a
// budget each would be sent again, doubling the load on what is left just
// when it can least take it.
import type { RetrySettings } from '../decide/generation.ts';

interface PoolCount {
  /** Requests of the pool in the proxy, from decision to last byte. */
  active: number;
  /** Of those, the ones on a retry now. */
  retrying: number;
}

export class RetryBudget {
  /** By pool key, so that counts carry across policy reloads. */
  private readonly pools = new Map<string, PoolCount>();

  /** A request of `pool` starts; call end() with the same key when it is over. */
  begin(pool: string): void {
    let count = this.pools.get(pool);
    if (!count) this.pools.set(pool, (count = { active: 0, retrying: 0 }));
    count.active++;
  }

  /** Whether a request of `pool` may retry now; if so, it counts as retrying until end(). */
  tryRetry(pool: string, settings: RetrySettings, alreadyRetrying: boolean): boolean {
    const count = this.pools.get(pool);
    if (!count) return false;
    if (alreadyRetrying) return true; // its slot is taken already
    const allowed = Math.max(settings.minConcurrency, (count.active * settings.budgetPercent) / 100);
    if (count.retrying >= allowed) return false;
    count.retrying++;
    return true;
  }

  end(pool: string, retried: boolean): void {
    const count = this.pools.get(pool);
    if (!count) return;
    count.active--;
    if (retried) count.retrying--;
    if (count.active <= 0) this.pools.delete(pool); // removed pools leave nothing behind
  }

  /** Requests and retries in flight (tests, admin). */
  inFlight(pool: string): { active: number; retrying: number } {
    const count = this.pools.get(pool);
    return { active: count?.active ?? 0, retrying: count?.retrying ?? 0 };
  }
}
