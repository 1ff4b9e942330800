// Two decisions of one request side by side: the live one and what the
// shadow policy would have done. A difference is named by the step where it
// shows first (model, then pool, then replica; a pool that differs makes the
// replica differ anyway) plus admission, each with what decided it on either
// side: a rule, a strategy, a check (docs/changing-policy.md).
import { chosen, type Decision } from '../decide/decision.ts';

export type ShadowStep = 'model' | 'pool' | 'replica' | 'admission';
export const SHADOW_STEPS: readonly ShadowStep[] = ['model', 'pool', 'replica', 'admission'];

/** One decision reduced to what is compared and shown (no prompt, no trace). */
export interface DecisionSide {
  readonly admitted: boolean;
  readonly status: number;
  /** The rejection's code. */
  readonly code?: string;
  readonly tenant?: string;
  readonly model?: string;
  readonly version?: string;
  readonly adapter?: string;
  readonly pool?: string;
  readonly replica?: string;
  /** What decided each step (a rule, an alias or cascade rule, a strategy, a check). */
  readonly by: { readonly model?: string; readonly pool?: string; readonly replica?: string; readonly admission?: string };
}

export interface StepDifference {
  readonly step: ShadowStep;
  /** What decided the step on each side. */
  readonly live: string;
  readonly shadow: string;
}

/** Label values and shown text are cut to this: rule names come from policy files. */
const MAX_NAME_CHARS = 80;
const cut = (text: string | undefined): string | undefined =>
  text === undefined ? undefined : text.length > MAX_NAME_CHARS ? `${text.slice(0, MAX_NAME_CHARS - 1)}…` : text;

export function decisionSide(decision: Decision): DecisionSide {
  const trace = decision.trace;
  const known = chosen(decision);
  return {
    admitted: decision.ok,
    status: known.status,
    code: decision.ok ? undefined : decision.rejection.code,
    tenant: cut(known.tenant),
    model: cut(known.model),
    version: cut(known.version),
    adapter: cut(known.adapter),
    pool: cut(known.pool),
    replica: decision.ok ? cut(decision.value.replica) : undefined,
    by: {
      model: cut(trace.model?.decidedBy),
      pool: cut(trace.pool?.decidedBy),
      replica: cut(decision.ok ? decision.value.strategy : trace.replica?.decidedBy),
      admission: cut(trace.admit?.decidedBy ?? (decision.ok ? 'admitted' : (trace.tenant?.decidedBy ?? decision.rejection.code))),
    },
  };
}

/** Where `shadow` differs from `live`; empty when the shadow would have done the same. */
export function compareSides(live: DecisionSide, shadow: DecisionSide): StepDifference[] {
  const out: StepDifference[] = [];
  const by = (step: ShadowStep) => ({ step, live: live.by[step] ?? 'none', shadow: shadow.by[step] ?? 'none' });
  if (live.model !== shadow.model || live.version !== shadow.version || live.adapter !== shadow.adapter) out.push(by('model'));
  else if (live.pool !== shadow.pool) out.push(by('pool'));
  else if (live.replica !== undefined && shadow.replica !== undefined && live.replica !== shadow.replica) out.push(by('replica'));
  if (live.admitted !== shadow.admitted || live.code !== shadow.code) {
    out.push({
      step: 'admission',
      live: live.admitted ? 'admitted' : (live.code ?? 'rejected'),
      shadow: shadow.admitted ? 'admitted' : (shadow.code ?? 'rejected'),
    });
  }
  return out;
}

/** "general / l8-general-2 by session-affinity", or "rejected 429 quota_exceeded by quota". */
export function describeSide(side: DecisionSide, step: ShadowStep | undefined): string {
  const where = side.admitted ? `${side.pool} / ${side.replica}` : `rejected ${side.status} ${side.code}${side.pool ? ` (pool ${side.pool})` : ''}`;
  const decider = step ? side.by[step] : side.admitted ? side.by.replica : side.by.admission;
  const model = step === 'model' && side.model ? `${side.model}@${side.version}${side.adapter ? ` + ${side.adapter}` : ''}, ` : '';
  return `${model}${where}${decider ? ` by ${decider}` : ''}`;
}

/** The line the explorer and /admin/shadow show for a pair. */
export function describePair(live: DecisionSide, shadow: DecisionSide, differences: readonly StepDifference[]): string {
  const step = differences[0]?.step;
  return `live: ${describeSide(live, step)}; shadow: ${describeSide(shadow, step)}`;
}
