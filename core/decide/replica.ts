// Decision 3 — which replica: the pool's strategy chain over the candidates,
// unsaturated ones first. Each strategy picks or passes; a strategy that
// throws or answers with a replica it wasn't given is skipped, one that keeps
// overrunning its budget is suspended, and the chain goes on. A caged
// (third-party) strategy that gives no answer in time, or is quarantined, is
// skipped the same way. When every strategy passes, least load.
import { isPass, leastLoaded, type Candidate, type RoutedRequest } from '../../sdk/index.ts';
import { CageSkip } from '../plugins/cage/skip.ts';
import { oncePer } from '../once-per.ts';
import { cleanReason } from './reason.ts';
import type { Pool } from '../policy/snapshot.ts';
import type { StepTrace, TraceAlternative } from './trace.ts';

export type StrategyFault = 'threw' | 'bad_answer' | 'over_budget' | 'timeout';

export interface ChainHooks {
  /** A strategy misbehaved; the request went on without it. */
  onFault?(pool: Pool, strategy: string, fault: StrategyFault, detail: string): void;
  /** Wall-clock budget of one pick, ms. */
  readonly pickBudgetMs?: number;
}

/**
 * The budget is wall-clock, so one GC pause or a descheduled process can
 * overrun it through no fault of the strategy; discarding that answer would
 * only make routing flap. A strategy that overruns repeatedly (3 times in
 * its last 100 picks) is slow for real: it is skipped for 10 s, then tried
 * again. Every overrun after an instance's first few picks is reported.
 */
const OVERRUNS_TO_SUSPEND = 3;
/** A fresh instance's first picks include compiling it (JIT): they are not held against it. */
const WARMUP_PICKS = 10;
const OVERRUN_WINDOW_PICKS = 100;
const SUSPENSION_MS = 10_000;

interface BudgetRecord {
  picks: number;
  overrunsAt: number[];
  suspendedUntil: number;
}

const budgetOf = oncePer((_instance: object): BudgetRecord => ({ picks: 0, overrunsAt: [], suspendedUntil: 0 }));

export interface ReplicaChoice {
  readonly replica: Candidate;
  /** The strategy that picked, or 'least-load (fallback)'. */
  readonly strategy: string;
  readonly trace: StepTrace;
}

export function chooseReplica(
  request: RoutedRequest,
  pool: Pool,
  candidates: readonly Candidate[],
  excluded: readonly TraceAlternative[],
  hooks: ChainHooks = {},
): ReplicaChoice {
  // Usually nothing is saturated: then the candidates themselves, not a filtered copy.
  const unsaturated = candidates.some((c) => c.saturated) ? candidates.filter((c) => !c.saturated) : candidates;
  const preferred = unsaturated.length > 0 ? unsaturated : candidates;
  const notes: TraceAlternative[] = excluded.map((e) => ({ ...e, note: `excluded: ${e.note}` }));
  if (unsaturated.length > 0 && unsaturated.length < candidates.length) {
    for (const c of candidates) if (c.saturated) notes.push({ name: c.id, note: `deprioritized: saturated (kv ${c.signals.kvUsage.toFixed(2)}, queue ${c.signals.queueDepth})` });
  }
  const budget = hooks.pickBudgetMs ?? 1;
  const facts = { candidates: candidates.length, saturated: candidates.length - unsaturated.length, excluded: excluded.length };

  for (const slot of pool.chain) {
    const record = budgetOf(slot.instance);
    let result;
    const started = performance.now();
    if (record.suspendedUntil > started) {
      notes.push({ name: slot.name, note: 'skipped: suspended for overrunning its budget' });
      continue;
    }
    try {
      result = slot.instance.pick(request, preferred);
    } catch (error) {
      if (error instanceof CageSkip) {
        // A timeout counts as an overrun; busy and quarantined were reported when they began.
        const booked = error.fault === 'timeout' ? overran(record, budget, Infinity, pool, slot.name, hooks, error.message) : NOT_BOOKED;
        if (booked === NOT_BOOKED && (error.fault === 'timeout' || error.fault === 'bad_answer')) hooks.onFault?.(pool, slot.name, error.fault, error.message);
        notes.push({ name: slot.name, note: booked === SUSPENDED ? `skipped: over budget ${OVERRUNS_TO_SUSPEND} times, suspended` : `skipped: ${error.note}` });
        continue;
      }
      hooks.onFault?.(pool, slot.name, 'threw', cleanReason((error as Error)?.message ?? String(error)));
      notes.push({ name: slot.name, note: 'skipped: threw' });
      continue;
    }
    // A caged strategy reports its own time: the round trip to its worker is not its fault.
    const elapsed = (slot.instance as { lastPickMs?: number }).lastPickMs ?? performance.now() - started;
    if (overran(record, budget, elapsed, pool, slot.name, hooks) === SUSPENDED) {
      notes.push({ name: slot.name, note: `skipped: over budget ${OVERRUNS_TO_SUSPEND} times, suspended` });
      continue;
    }
    if (result == null || isPass(result)) {
      notes.push({ name: slot.name, note: `passed: ${result ? cleanReason(result.reason) : 'no answer'}` });
      continue;
    }
    const chosen = typeof result.replica === 'string' ? preferred.find((c) => c.id === result.replica) : undefined;
    if (!chosen) {
      hooks.onFault?.(pool, slot.name, 'bad_answer', `answered ${cleanReason(JSON.stringify(result.replica) ?? 'undefined')}, not one of its candidates`);
      notes.push({ name: slot.name, note: 'skipped: answered a replica it was not given' });
      continue;
    }
    const alternatives = (result.alternatives ?? []).map((a) => ({ name: a.replica, score: a.score, note: a.note }));
    return {
      replica: chosen,
      strategy: slot.name,
      trace: { decidedBy: slot.name, reason: cleanReason(result.reason), facts, alternatives: [...notes, ...alternatives] },
    };
  }

  const { best, scores } = leastLoaded(preferred, pool.weights);
  return {
    replica: best!,
    strategy: 'least-load (fallback)',
    trace: {
      decidedBy: 'least-load (fallback)',
      reason: 'every strategy passed: lowest load score',
      facts,
      alternatives: [...notes, ...scores.map((s) => ({ name: s.replica, score: s.score }))],
    },
  };
}

const NOT_BOOKED = 0;
const BOOKED = 1;
const SUSPENDED = 2;

/**
 * Books one pick against the strategy's budget: NOT_BOOKED when within it
 * (or a warm-up pick), BOOKED when an overrun was reported, SUSPENDED when
 * this overrun suspends it. A timed-out caged pick books Infinity.
 */
function overran(record: BudgetRecord, budget: number, elapsed: number, pool: Pool, name: string, hooks: ChainHooks, detail?: string): number {
  record.picks++;
  if (!(elapsed > budget) || record.picks <= WARMUP_PICKS) return NOT_BOOKED;
  record.overrunsAt = record.overrunsAt.filter((at) => at > record.picks - OVERRUN_WINDOW_PICKS);
  record.overrunsAt.push(record.picks);
  const suspend = record.overrunsAt.length >= OVERRUNS_TO_SUSPEND;
  const what = detail ?? `pick took ${elapsed.toFixed(2)} ms (budget ${budget} ms)`;
  hooks.onFault?.(pool, name, elapsed === Infinity ? 'timeout' : 'over_budget', `${what}${suspend ? `; suspended for ${SUSPENSION_MS / 1000} s` : ''}`);
  if (!suspend) return BOOKED;
  record.suspendedUntil = performance.now() + SUSPENSION_MS;
  record.overrunsAt = [];
  return SUSPENDED;
}
