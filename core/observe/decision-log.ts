// The most recent decisions, newest first, for /admin/decisions: when routing
// goes wrong you need to see the decision. Bounded twice: at most `capacity`
// entries and about `maxBytes` in all, and every string in an entry is cut to
// MAX_STRING_CHARS, so that nothing a client sends (a multi-megabyte model
// name, a long header echoed in an error) is kept whole.
import { chosen, type Decision } from '../decide/decide.ts';
import type { DecisionTrace, StepTrace, TraceAlternative } from '../decide/trace.ts';
import type { RequestFacts } from '../facts/request-facts.ts';
import { DecisionStream } from './decision-stream.ts';

/** What the request was, beside what was decided: the explorer's conversation, endpoint and stream columns. */
export type RequestSummary = Pick<RequestFacts, 'conversationId' | 'endpoint' | 'stream'>;

export const MAX_STRING_CHARS = 1024;
/** Deeper values are summarized: the trace is a few levels deep, and plugins add notes, not trees. */
const MAX_DEPTH = 8;
/** Rough cost of one value besides its characters (headers, pointers). */
const NODE_BYTES = 16;
/** Rough cost of an entry's fixed structure: its fields and the trace's steps. */
const ENTRY_BYTES = 1024;

export interface DecisionLogOptions {
  readonly capacity?: number;
  /** Estimated bytes of all entries together (strings at 2 bytes a character). */
  readonly maxBytes?: number;
}

// An entry is no object of its own: its fields are cells of one array, a
// row of FIELDS cells per ring slot, and its trace is rebuilt from its steps
// when read. Most values are the policy's own strings and small numbers,
// shared by every entry; what survives a request is only what it made (its
// id, a reason, its replica and admit steps), not an object tree per entry
// for every scavenge to copy (docs/serving.md "Where the time goes").
// The cells, in the order /admin/decisions shows them (decisionJson's):
const REQUEST_ID = 0;
const STATUS = 1;
const TENANT = 2;
const MODEL = 3;
const VERSION = 4;
const ADAPTER = 5;
const CANARY = 6;
const POOL = 7;
const PRIORITY = 8;
const REPLICA = 9;
const REASON = 10;
/** A rejection's; undefined for an admitted request. */
const ERROR = 11;
const RETRY_AFTER = 12;
const ACTION = 13;
/** The bounded trace itself, only when its keys are not the steps in their order (then the step cells are unused). */
const TRACE = 14;
/**
 * The bounded steps, STEP_CELLS cells each, at their trace positions (tenant,
 * model, pool, replica, admit). A step the entry before had too (a policy's
 * own tenant, model and pool steps) is kept by reference: it costs nothing.
 * Any other (the replica and admit steps, made per request) is kept field by
 * field, its keys' presence as a mask, so that the step object need not
 * outlive the request.
 */
const STEPS = 15;
const STEP_CELLS = 6;
const STEP_OBJECT = 0;
const STEP_KEYS = 1;
const STEP_FIELDS = ['decidedBy', 'reason', 'facts', 'alternatives'] as const;
/** What the request was; undefined (CONVERSATION_ID included) for a request refused before its facts were read. */
const ENDPOINT = STEPS + 5 * STEP_CELLS;
const STREAM = ENDPOINT + 1;
const CONVERSATION_ID = ENDPOINT + 2;
const FIELDS = ENDPOINT + 3;
/** Kept for a step's empty alternatives, shown as a fresh empty array. */
const NO_ALTERNATIVES: readonly TraceAlternative[] = Object.freeze([]);
const STEP_NAMES = ['tenant', 'model', 'pool', 'replica', 'admit'] as const;

export class DecisionLog {
  readonly capacity: number;
  readonly maxBytes: number;
  private readonly cells: unknown[];
  /** Epoch ms of each slot's decision; formatted only when read. */
  private readonly at: Float64Array;
  private readonly sizes: Float64Array;
  private next = 0;
  private count = 0;
  private bytes = 0;
  /** Bytes of the value being bounded; a field, not a closure, to keep add() allocation-free. */
  private measured = 0;
  /** The last step seen at each trace position (tenant, model, pool, replica, admit), bounded, and its size (step()). */
  private readonly lastSteps: (StepTrace | undefined)[] = [undefined, undefined, undefined, undefined, undefined];
  private readonly lastBounded: (StepTrace | undefined)[] = [undefined, undefined, undefined, undefined, undefined];
  private readonly lastSizes: number[] = [0, 0, 0, 0, 0];
  /** Whether step() found the step at each position to be the last one seen there (keepStep()). */
  private readonly reused: boolean[] = [false, false, false, false, false];
  /** Watchers of new decisions (the explorer's live stream). */
  readonly stream = new DecisionStream();

  constructor(options: DecisionLogOptions | number = {}) {
    const o = typeof options === 'number' ? { capacity: options } : options;
    this.capacity = o.capacity ?? 1000;
    this.maxBytes = o.maxBytes ?? 4 * 1024 * 1024;
    this.cells = new Array<unknown>(this.capacity * FIELDS).fill(undefined);
    this.at = new Float64Array(this.capacity);
    this.sizes = new Float64Array(this.capacity);
  }

  /** `request` is absent for a request refused before its facts were read. */
  add(decision: Decision, request?: RequestSummary, now = Date.now()): void {
    // The slot is written before its size is known: the entries to drop are the oldest, never this one's slot unless the ring is full.
    if (this.count === this.capacity) this.dropOldest();
    const slot = this.next;
    this.measured = ENTRY_BYTES;
    this.write(slot * FIELDS, decision, request);
    const size = this.measured;
    while (this.count > 0 && this.bytes + size > this.maxBytes) this.dropOldest();
    this.at[slot] = now;
    this.sizes[slot] = size;
    this.bytes += size;
    this.count++;
    this.next = (slot + 1) % this.capacity;
    if (this.stream.size > 0) this.stream.publish(() => this.shown(slot));
  }

  /** Entries held and their estimated bytes (tests, /admin/state). */
  usage(): { entries: number; bytes: number } {
    return { entries: this.count, bytes: this.bytes };
  }

  recent(limit: number): Record<string, unknown>[] {
    const out: Record<string, unknown>[] = [];
    for (let i = 1; i <= Math.min(limit, this.count); i++) out.push(this.shown((this.next - i + this.capacity) % this.capacity));
    return out;
  }

  private dropOldest(): void {
    const oldest = (this.next - this.count + this.capacity) % this.capacity;
    this.cells.fill(undefined, oldest * FIELDS, (oldest + 1) * FIELDS);
    this.bytes -= this.sizes[oldest];
    this.count--;
  }

  /**
   * The decision's fields as decisionJson gives them, long strings cut, into
   * the row at `row`. Read by name: a generic walk costs several times more,
   * on every request.
   */
  private write(row: number, decision: Decision, request: RequestSummary | undefined): void {
    const c = this.cells;
    const known = chosen(decision);
    c[row + REQUEST_ID] = this.boundedValue(known.requestId);
    c[row + STATUS] = known.status;
    c[row + TENANT] = this.boundedValue(known.tenant ?? null);
    c[row + MODEL] = this.boundedValue(known.model ?? null);
    c[row + VERSION] = this.boundedValue(known.version ?? null);
    c[row + ADAPTER] = this.boundedValue(known.adapter ?? null);
    c[row + CANARY] = known.canary ?? null;
    c[row + POOL] = this.boundedValue(known.pool ?? null);
    c[row + PRIORITY] = known.priority ?? null;
    c[row + REPLICA] = this.boundedValue(decision.ok ? decision.value.replica : null);
    c[row + REASON] = this.boundedValue(known.reason);
    if (!decision.ok) {
      const r = decision.rejection;
      c[row + ERROR] = this.bounded({ code: r.code, type: r.type, message: r.message }, 1);
      c[row + RETRY_AFTER] = r.retryAfterS;
      if (known.action) c[row + ACTION] = this.bounded(known.action, 1);
    }
    // The trace's steps are the decision's own: copied only where a string was cut.
    const trace = decision.trace;
    const tenant = this.step(0, trace.tenant);
    const model = this.step(1, trace.model);
    const pool = this.step(2, trace.pool);
    const replica = this.step(3, trace.replica);
    const admit = this.step(4, trace.admit);
    if (inStepOrder(trace)) {
      this.keepStep(row, 0, tenant);
      this.keepStep(row, 1, model);
      this.keepStep(row, 2, pool);
      this.keepStep(row, 3, replica);
      this.keepStep(row, 4, admit);
    } else {
      const cut = tenant !== trace.tenant || model !== trace.model || pool !== trace.pool || replica !== trace.replica || admit !== trace.admit;
      c[row + TRACE] = cut ? { ...trace, tenant, model, pool, replica, admit } : trace;
    }
    if (request) {
      c[row + ENDPOINT] = request.endpoint;
      c[row + STREAM] = request.stream;
      // A client's header: cut like every other string.
      c[row + CONVERSATION_ID] = request.conversationId === undefined ? null : this.boundedString(request.conversationId);
    }
  }

  /** The entry in `slot` as /admin/decisions and the live stream show it. */
  private shown(slot: number): Record<string, unknown> {
    const c = this.cells;
    const row = slot * FIELDS;
    const entry: Record<string, unknown> = {
      at: new Date(this.at[slot]).toISOString(),
      requestId: c[row + REQUEST_ID],
      status: c[row + STATUS],
      tenant: c[row + TENANT],
      model: c[row + MODEL],
      version: c[row + VERSION],
      adapter: c[row + ADAPTER],
      canary: c[row + CANARY],
      pool: c[row + POOL],
      priority: c[row + PRIORITY],
      replica: c[row + REPLICA],
      reason: c[row + REASON],
    };
    if (c[row + ERROR] !== undefined) {
      entry.error = c[row + ERROR];
      if (c[row + RETRY_AFTER] !== undefined) entry.retryAfter = c[row + RETRY_AFTER];
      if (c[row + ACTION] !== undefined) entry.action = c[row + ACTION];
    }
    entry.trace = c[row + TRACE] ?? this.traceOf(row);
    if (c[row + CONVERSATION_ID] !== undefined) {
      entry.endpoint = c[row + ENDPOINT];
      entry.stream = c[row + STREAM];
      entry.conversationId = c[row + CONVERSATION_ID];
    }
    return entry;
  }

  /**
   * Keeps the bounded step at trace position `at` in the row: by reference
   * when the entry before had it too (step() found it), else field by field
   * when its keys are STEP_FIELDS in their order (as decide() writes them).
   */
  private keepStep(row: number, at: number, step: StepTrace | undefined): void {
    const cell = row + STEPS + at * STEP_CELLS;
    const keys = typeof step !== 'object' || step === null || this.reused[at] ? -1 : stepKeys(step);
    if (keys < 0) {
      this.cells[cell + STEP_OBJECT] = step;
      return;
    }
    const s = step as StepTrace;
    this.cells[cell + STEP_KEYS] = keys;
    this.cells[cell + 2] = s.decidedBy;
    this.cells[cell + 3] = s.reason;
    this.cells[cell + 4] = s.facts;
    this.cells[cell + 5] = Array.isArray(s.alternatives) && s.alternatives.length === 0 ? NO_ALTERNATIVES : s.alternatives;
  }

  /** The step at trace position `at` of the row, as it was given to keepStep(). */
  private stepOf(row: number, at: number): StepTrace | undefined {
    const c = this.cells;
    const cell = row + STEPS + at * STEP_CELLS;
    const keys = c[cell + STEP_KEYS] as number | undefined;
    if (keys === undefined) return c[cell + STEP_OBJECT] as StepTrace | undefined;
    const step: Record<string, unknown> = {};
    for (let k = 0; k < STEP_FIELDS.length; k++) {
      const value = c[cell + 2 + k];
      if (keys & (1 << k)) step[STEP_FIELDS[k]] = value === NO_ALTERNATIVES ? [] : value;
    }
    return step as unknown as StepTrace;
  }

  /** The trace of the row's steps, in their order. */
  private traceOf(row: number): DecisionTrace {
    const trace: Record<string, unknown> = {};
    for (let at = 0; at < STEP_NAMES.length; at++) {
      const step = this.stepOf(row, at);
      if (step !== undefined) trace[STEP_NAMES[at]] = step;
    }
    return trace as DecisionTrace;
  }

  /**
   * The step at trace position `at`, bounded. A policy's tenant, model and
   * pool steps are often the very same objects request after request: the
   * last one at each position is bounded once, its size remembered.
   */
  private step(at: number, step: StepTrace | undefined): StepTrace | undefined {
    if (!step) return step;
    this.reused[at] = step === this.lastSteps[at];
    if (this.reused[at]) {
      this.measured += this.lastSizes[at];
      return this.lastBounded[at];
    }
    const before = this.measured;
    const bounded = this.boundedStep(step);
    this.lastSteps[at] = step;
    this.lastBounded[at] = bounded;
    this.lastSizes[at] = this.measured - before;
    return bounded;
  }

  private boundedValue(value: unknown): unknown {
    if (typeof value === 'string') return this.boundedString(value);
    this.measured += NODE_BYTES;
    return value === null || typeof value !== 'object' ? value : this.bounded(value, 1);
  }

  private boundedStep(step: StepTrace): StepTrace {
    const decidedBy = this.boundedString(step.decidedBy);
    const reason = this.boundedString(step.reason);
    const facts = step.facts === undefined ? undefined : this.bounded(step.facts, 2);
    let alternatives = step.alternatives;
    if (alternatives !== undefined) {
      let cut: TraceAlternative[] | undefined;
      for (let i = 0; i < alternatives.length; i++) {
        const alternative = alternatives[i];
        this.measured += NODE_BYTES;
        const name = this.boundedString(alternative.name);
        const note = alternative.note === undefined ? undefined : this.boundedString(alternative.note);
        if (name !== alternative.name || note !== alternative.note) (cut ??= alternatives.slice())[i] = { ...alternative, name, note };
      }
      if (cut !== undefined) alternatives = cut;
    }
    if (decidedBy === step.decidedBy && reason === step.reason && facts === step.facts && alternatives === step.alternatives) return step;
    return { ...step, decidedBy, reason, facts: facts as StepTrace['facts'], alternatives };
  }

  private boundedString(value: string): string {
    // Anything not a string (a plugin's mistake) is measured and cut like any value.
    if (typeof value !== 'string') return this.bounded(value, 3) as string;
    this.measured += NODE_BYTES + 2 * Math.min(value.length, MAX_STRING_CHARS);
    return value.length > MAX_STRING_CHARS ? truncated(value) : value;
  }

  /**
   * The value with long strings cut, counting its bytes into `measured`. Objects
   * are copied only where something was cut: most decisions pass untouched.
   */
  private bounded(value: unknown, depth: number): unknown {
    this.measured += NODE_BYTES;
    if (typeof value === 'string') {
      this.measured += 2 * Math.min(value.length, MAX_STRING_CHARS);
      return value.length > MAX_STRING_CHARS ? truncated(value) : value;
    }
    if (typeof value !== 'object' || value === null) return value;
    if (depth >= MAX_DEPTH) return '[nested too deep]';
    if (Array.isArray(value)) {
      let copy: unknown[] | undefined;
      for (let i = 0; i < value.length; i++) {
        const item: unknown = value[i];
        const b = this.bounded(item, depth + 1);
        if (b !== item) (copy ??= value.slice())[i] = b;
      }
      return copy ?? value;
    }
    let copy: Record<string, unknown> | undefined;
    for (const key in value) {
      const item = (value as Record<string, unknown>)[key];
      const b = this.bounded(item, depth + 1);
      if (b !== item) (copy ??= { ...(value as Record<string, unknown>) })[key] = b;
    }
    return copy ?? value;
  }
}

/** Whether the trace's keys are its steps in their order, each once (as decide() sets them): then the steps alone rebuild it. */
function inStepOrder(trace: DecisionTrace): boolean {
  let at = 0;
  for (const key in trace) {
    while (at < STEP_NAMES.length && STEP_NAMES[at] !== key) at++;
    if (at === STEP_NAMES.length) return false;
    at++;
  }
  return true;
}

/** The step's keys as a mask of STEP_FIELDS, or -1 when it has others or has them out of that order. */
function stepKeys(step: StepTrace): number {
  let keys = 0;
  let k = 0;
  for (const key in step) {
    while (k < STEP_FIELDS.length && STEP_FIELDS[k] !== key) k++;
    if (k === STEP_FIELDS.length) return -1;
    keys |= 1 << k++;
  }
  return keys;
}

/**
 * The head of a long string, as a fresh string: a slice of a long string is a
 * view that keeps the whole original alive, which is what must not be kept.
 */
export function truncated(text: string): string {
  if (text.length <= MAX_STRING_CHARS) return text;
  return Buffer.from(`${text.slice(0, MAX_STRING_CHARS)}… (${text.length - MAX_STRING_CHARS} more characters)`, 'utf16le').toString('utf16le');
}
