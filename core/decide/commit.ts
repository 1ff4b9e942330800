// What follows a decision, kept out of decide() so that deciding stays pure:
// commit() takes the admitted request's quota, counts the strategies' pick
// times against their budgets, reports their faults and tells them where the
// request went (onRouted); complete() tells them how it ended (onCompleted).
// The proxy and the simulator both call this pair, and nothing else touches
// quota, budgets or strategy hooks.
import type { Pool } from './generation.ts';
import type { Admitted, Decision } from './decision.ts';
import type { DecideEnv } from './env.ts';
import type { StrategyFault } from './replica.ts';

export interface CommitHooks {
  /** A strategy misbehaved; the request went on without it. */
  onFault?(pool: Pool, strategy: string, fault: StrategyFault, detail: string): void;
}

const NO_HOOKS: CommitHooks = Object.freeze({});

/**
 * Applies a decision: for any decision whose strategy chain ran, its budgets
 * and faults; for an admitted one, its quota and onRouted. Call it once per
 * decide(), right after it (no await between: the quota decide() saw is the
 * quota taken).
 */
export function commit(decision: Decision, env: DecideEnv, hooks: CommitHooks = NO_HOOKS): void {
  const handles = decision.handles;
  if (handles) {
    const { chain: run, pool } = handles;
    const { pickMs, budgetMs, waitedMs } = run;
    for (const incident of run.incidents) hooks.onFault?.(pool, incident.strategy, incident.fault, incident.detail);
    for (let i = 0; i < pickMs.length; i++) {
      const elapsed = pickMs[i];
      if (Number.isNaN(elapsed)) continue;
      const overrun = pool.chain[i].budget.count(elapsed, waitedMs?.[i] ?? 0, budgetMs, env.clock);
      // A caged pick that timed out (Infinity) was reported as a timeout already: it only counts here.
      if (overrun && elapsed !== Infinity) hooks.onFault?.(pool, pool.chain[i].name, 'over_budget', overrun);
    }
  }
  if (!decision.ok) return;
  const { charge, tenant, pool, routed, decidedAt } = decision.handles;
  // At the time decide() checked it: the same quota, and no clock read of its own.
  if (charge) env.quota.take(tenant.id, charge, tenant.quotas, decidedAt);
  for (const slot of pool.chain) {
    try {
      slot.instance.onRouted?.(routed, decision.value.replica);
    } catch (error) {
      hooks.onFault?.(pool, slot.name, 'threw', `onRouted: ${(error as Error)?.message ?? String(error)}`);
    }
  }
}

/**
 * Whether complete() has anything to do for a request of `pool`: a strategy of its chain has onCompleted. A caller that
 * keeps requests in flight for long (the simulator) keeps their decision's handles only then.
 */
export function wantsCompletion(pool: Pool): boolean {
  for (const slot of pool.chain) if (slot.instance.onCompleted !== undefined) return true;
  return false;
}

/** The request sent on `decision` has ended: `ok` when the replica answered it successfully. */
export function complete(decision: Pick<Admitted, 'value' | 'handles'>, ok: boolean, hooks: CommitHooks = NO_HOOKS): void {
  const { pool, routed } = decision.handles;
  for (const slot of pool.chain) {
    try {
      slot.instance.onCompleted?.(routed, decision.value.replica, ok);
    } catch (error) {
      hooks.onFault?.(pool, slot.name, 'threw', `onCompleted: ${(error as Error)?.message ?? String(error)}`);
    }
  }
}
