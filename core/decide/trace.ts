// Every decision explains itself: for each step, the facts it used, what
// decided, why, and the alternatives it weighed.

export interface TraceAlternative {
  readonly name: string;
  readonly score?: number;
  readonly note?: string;
}

export interface StepTrace {
  /** The rule, strategy or check that decided this step. */
  readonly decidedBy: string;
  readonly reason: string;
  readonly facts?: Readonly<Record<string, unknown>>;
  readonly alternatives?: readonly TraceAlternative[];
}

export interface DecisionTrace {
  tenant?: StepTrace;
  model?: StepTrace;
  pool?: StepTrace;
  replica?: StepTrace;
  admit?: StepTrace;
}
