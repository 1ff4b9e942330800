// Decision 3 — which replica: the pool's strategy chain over the candidates,
// unsaturated ones first. Each strategy picks or passes; a strategy that
// throws or answers with a replica it wasn't given is skipped, one that keeps
// overrunning its budget is suspended, and the chain goes on. When every
// strategy passes, least load.
import { isPass, leastLoaded, type Candidate, type RoutedRequest } from '../../sdk/index.ts';
import { oncePer } from '../once-per.ts';
import type { Pool } from '../policy/snapshot.ts';
import type { StepTrace, TraceAlternative } from './trace.ts';

export type StrategyFault = 'threw' | 'bad_answer' | 'over_budget';

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
      hooks.onFault?.(pool, slot.name, 'threw', (error as Error)?.message ?? String(error));
      notes.push({ name: slot.name, note: 'skipped: threw' });
      continue;
    }
    const elapsed = performance.now() - started;
    record.picks++;
    if (elapsed > budget && record.picks > WARMUP_PICKS) {
      record.overrunsAt = record.overrunsAt.filter((at) => at > record.picks - OVERRUN_WINDOW_PICKS);
      record.overrunsAt.push(record.picks);
      const suspend = record.overrunsAt.length >= OVERRUNS_TO_SUSPEND;
      hooks.onFault?.(pool, slot.name, 'over_budget', `pick took ${elapsed.toFixed(2)} ms (budget ${budget} ms)${suspend ? `; suspended for ${SUSPENSION_MS / 1000} s` : ''}`);
      if (suspend) {
        record.suspendedUntil = started + elapsed + SUSPENSION_MS;
        record.overrunsAt = [];
        notes.push({ name: slot.name, note: `skipped: over budget ${OVERRUNS_TO_SUSPEND} times, suspended` });
        continue;
      }
    }
    if (result == null || isPass(result)) {
      notes.push({ name: slot.name, note: `passed: ${result?.reason ?? 'no answer'}` });
      continue;
    }
    const chosen = typeof result.replica === 'string' ? preferred.find((c) => c.id === result.replica) : undefined;
    if (!chosen) {
      hooks.onFault?.(pool, slot.name, 'bad_answer', `answered ${JSON.stringify(result.replica)}, not one of its candidates`);
      notes.push({ name: slot.name, note: 'skipped: answered a replica it was not given' });
      continue;
    }
    const alternatives = (result.alternatives ?? []).map((a) => ({ name: a.replica, score: a.score, note: a.note }));
    return {
      replica: chosen,
      strategy: slot.name,
      trace: { decidedBy: slot.name, reason: String(result.reason ?? ''), facts, alternatives: [...notes, ...alternatives] },
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
