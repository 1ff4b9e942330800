// Decision 3 — which replica: the pool's strategy chain over the candidates,
// unsaturated ones first. Each strategy picks or passes; a strategy that
// throws or answers with a replica it wasn't given is skipped, one that keeps
// overrunning its budget is suspended (budget.ts), and the chain goes on. A
// caged (third-party) strategy that gives no answer in time, or is
// quarantined, is skipped the same way. When every strategy passes, least
// load. Pure: pick times are measured on the injected clock and left, with
// faults, for commit() to count and report; an inline pick that overran has
// what the thread waited for a CPU meanwhile taken out (thread-wait.ts).
import { candidatePositions, isPass, leastLoaded, type Alternative, type Candidate, type RoutedRequest } from '../../sdk/index.ts';
import { CageSkip } from '../plugins/cage/skip.ts';
import { cleanNote, cleanReason } from './reason.ts';
import type { Pool } from './generation.ts';
import type { CandidateSet } from './candidates.ts';
import type { ChainRun, StrategyIncident } from './decision.ts';
import type { StepTrace, TraceAlternative } from './trace.ts';
import type { ThreadWait } from './thread-wait.ts';

export type StrategyFault = 'threw' | 'bad_answer' | 'over_budget' | 'timeout';

const NO_INCIDENTS: readonly StrategyIncident[] = Object.freeze([]);
const NO_ALTERNATIVES: readonly Alternative[] = Object.freeze([]);

export interface ReplicaChoice {
  readonly replica: Candidate;
  /** The strategy that picked, or 'least-load (fallback)'. */
  readonly strategy: string;
  readonly trace: StepTrace;
  /** Pick times and faults, for commit() to count and report. */
  readonly run: ChainRun;
}

/** An unlimited budget times nothing: one shared run for every quiet decision. */
const UNTIMED: ChainRun = Object.freeze({ budgetMs: Infinity, pickMs: Object.freeze([]) as readonly number[], incidents: NO_INCIDENTS });

export function chooseReplica(
  request: RoutedRequest,
  pool: Pool,
  { candidates, excluded, saturated, unsaturated: kept }: CandidateSet,
  budgetMs: number,
  clock: () => number,
  threadWait?: ThreadWait,
): ReplicaChoice {
  // Usually nothing is saturated: then the candidates themselves (the kept, shared list), not a filtered copy; else the kept unsaturated list.
  const unsaturated = saturated > 0 ? (kept ?? candidates.filter((c) => !c.saturated)) : candidates;
  const preferred = unsaturated.length > 0 ? unsaturated : candidates;
  const notes: TraceAlternative[] = excluded.length === 0 ? [] : excluded.map((e) => ({ ...e, note: `excluded: ${e.note}` }));
  if (unsaturated.length > 0 && unsaturated.length < candidates.length) {
    for (const c of candidates)
      if (c.saturated) notes.push({ name: c.id, note: `deprioritized: saturated (kv ${c.signals.kvUsage.toFixed(2)}, queue ${c.signals.queueDepth})` });
  }
  const facts = { candidates: candidates.length, saturated: candidates.length - unsaturated.length, excluded: excluded.length };
  // Picks are timed only against a finite budget (the simulator and `explain` have none).
  const timed = budgetMs !== Infinity;
  const pickMs: number[] = [];
  let waitedMs: number[] | undefined;
  let incidents = NO_INCIDENTS as StrategyIncident[];
  const chain = pool.chain;
  // The clock as read when the last pick returned, else NaN: the next pick starts there. A read costs
  // 0.1-0.4 µs on a virtual machine's clock, and what lies between (reading a pass) is the router's, a
  // fraction of a µs against a 1 ms budget.
  let returnedAt = NaN;

  for (let i = 0; i < chain.length; i++) {
    const slot = chain[i];
    if (timed) pickMs.push(NaN);
    let result;
    const suspendedUntil = slot.budget.suspendedUntil;
    let started = timed ? (Number.isNaN(returnedAt) ? clock() : returnedAt) : 0;
    returnedAt = NaN;
    // After a read of the thread's wait the pick's clock starts again, so a wait during the read is inside it (thread-wait.ts).
    if (timed && threadWait && (i === 0 || slot.budget.exactNext) && threadWait.sample(started, slot.budget.exactNext)) started = clock();
    if (suspendedUntil > 0 && suspendedUntil > (timed ? started : clock())) {
      notes.push({ name: slot.name, note: 'skipped: suspended for overrunning its budget' });
      continue;
    }
    try {
      result = slot.instance.pick(request, slot.ownCandidates ? preferred.slice() : preferred);
    } catch (error) {
      if (error instanceof CageSkip) {
        // No answer in time is reported once and counts as an overrun (commit() books it); busy and quarantined were reported when they began.
        if (error.fault === 'timeout' && timed) pickMs[i] = Infinity;
        if (error.fault === 'bad_answer' || error.fault === 'timeout') {
          (incidents === NO_INCIDENTS ? (incidents = []) : incidents).push({ strategy: slot.name, fault: error.fault, detail: cleanReason(error.message) });
        }
        const suspends = error.fault === 'timeout' && timed && slot.budget.wouldSuspend(Infinity, 0, budgetMs);
        notes.push({ name: slot.name, note: suspends ? 'skipped: over budget 3 times, suspended' : `skipped: ${error.note}` });
        continue;
      }
      (incidents === NO_INCIDENTS ? (incidents = []) : incidents).push({
        strategy: slot.name,
        fault: 'threw',
        detail: cleanReason((error as Error)?.message ?? String(error)),
      });
      notes.push({ name: slot.name, note: 'skipped: threw' });
      continue;
    }
    if (timed) {
      // A caged strategy reports its own time: the round trip to its worker is not its fault.
      const caged = (slot.instance as { lastPickMs?: number }).lastPickMs;
      const elapsed = (pickMs[i] = caged ?? (returnedAt = clock()) - started);
      let waited = 0;
      if (elapsed > budgetMs && caged === undefined && threadWait) {
        waited = threadWait.waitedSinceSample(returnedAt);
        (waitedMs ??= [])[i] = waited;
      }
      if (slot.budget.wouldSuspend(elapsed, waited, budgetMs)) {
        notes.push({ name: slot.name, note: 'skipped: over budget 3 times, suspended' });
        continue;
      }
    }
    // Reading the answer runs the plugin's code too (a getter may throw): a fault of that strategy alone.
    try {
      if (result == null || isPass(result)) {
        notes.push({ name: slot.name, note: `passed: ${result?.reason == null ? 'no answer' : cleanNote(result.reason)}` });
        continue;
      }
      // The shared list's index is kept with it (a large pool is not walked); a filtered list is indexed afresh.
      const at = typeof result.replica === 'string' ? candidatePositions(preferred).get(result.replica) : undefined;
      const chosen = at === undefined ? undefined : preferred[at];
      if (!chosen) {
        (incidents === NO_INCIDENTS ? (incidents = []) : incidents).push({
          strategy: slot.name,
          fault: 'bad_answer',
          detail: `answered ${cleanReason(JSON.stringify(result.replica) ?? 'undefined')}, not one of its candidates`,
        });
        notes.push({ name: slot.name, note: 'skipped: answered a replica it was not given' });
        continue;
      }
      // Ids and notes recur from pick to pick: cleanNote checks each text once.
      const alternatives = (result.alternatives ?? NO_ALTERNATIVES).map((a) => ({
        name: cleanNote(a.replica),
        score: a.score,
        note: a.note === undefined ? undefined : cleanNote(a.note),
      }));
      // A strategy's reason recurs too (session-affinity keeps each owner's): cleanNote, which answers as cleanReason.
      const reason = cleanNote(result.reason);
      if (timed) for (let j = i + 1; j < chain.length; j++) pickMs.push(NaN);
      // After the chain's notes, as a spread would put them (a hole read as undefined), without a third array.
      for (let k = 0; k < alternatives.length; k++) notes.push(alternatives[k]);
      return {
        replica: chosen,
        strategy: slot.name,
        trace: { decidedBy: slot.name, reason, facts, alternatives: notes },
        run: chainRun(timed, budgetMs, pickMs, waitedMs, incidents),
      };
    } catch (error) {
      (incidents === NO_INCIDENTS ? (incidents = []) : incidents).push({
        strategy: slot.name,
        fault: 'bad_answer',
        detail: cleanReason(`its answer threw when read: ${(error as Error)?.message ?? String(error)}`),
      });
      notes.push({ name: slot.name, note: 'skipped: its answer could not be read' });
    }
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
    run: chainRun(timed, budgetMs, pickMs, waitedMs, incidents),
  };
}

function chainRun(
  timed: boolean,
  budgetMs: number,
  pickMs: readonly number[],
  waitedMs: readonly number[] | undefined,
  incidents: readonly StrategyIncident[],
): ChainRun {
  if (waitedMs) return { budgetMs, pickMs, waitedMs, incidents };
  return timed || incidents !== NO_INCIDENTS ? { budgetMs, pickMs, incidents } : UNTIMED;
}
