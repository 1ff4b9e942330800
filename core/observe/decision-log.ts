// The most recent decisions, newest first, for /admin/decisions: when routing
// goes wrong you need to see the decision. Bounded twice: at most `capacity`
// entries and about `maxBytes` in all, and every string in an entry is cut to
// MAX_STRING_CHARS, so that nothing a client sends (a multi-megabyte model
// name, a long header echoed in an error) is kept whole.
import { decisionJson, type Decision } from '../decide/decide.ts';
import type { DecisionTrace, StepTrace, TraceAlternative } from '../decide/trace.ts';
import type { RequestFacts } from '../facts/request-facts.ts';
import { DecisionStream } from './decision-stream.ts';

export interface LoggedDecision {
  /** Epoch ms; formatted only when read. */
  readonly at: number;
  /**
   * The decision as /admin/decisions shows it. Not the Decision itself: that
   * holds the routed request and, through it, the prompt, which a thousand
   * entries would keep alive long enough to be copied by every scavenge.
   */
  readonly decision: Record<string, unknown>;
  /** Set when the request was retried, failed upstream, or ended. */
  outcome?: string;
}

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

export class DecisionLog {
  readonly capacity: number;
  readonly maxBytes: number;
  private readonly ring: (LoggedDecision | undefined)[];
  private readonly sizes: number[];
  private next = 0;
  private count = 0;
  private bytes = 0;
  /** Bytes of the value being bounded; a field, not a closure, to keep add() allocation-free. */
  private measured = 0;
  /** The last step seen at each trace position (tenant, model, pool, replica, admit), bounded, and its size (step()). */
  private readonly lastSteps: (StepTrace | undefined)[] = [undefined, undefined, undefined, undefined, undefined];
  private readonly lastBounded: (StepTrace | undefined)[] = [undefined, undefined, undefined, undefined, undefined];
  private readonly lastSizes: number[] = [0, 0, 0, 0, 0];
  /** Watchers of new decisions (the explorer's live stream). */
  readonly stream = new DecisionStream();

  constructor(options: DecisionLogOptions | number = {}) {
    const o = typeof options === 'number' ? { capacity: options } : options;
    this.capacity = o.capacity ?? 1000;
    this.maxBytes = o.maxBytes ?? 4 * 1024 * 1024;
    this.ring = new Array(this.capacity);
    this.sizes = new Array<number>(this.capacity).fill(0);
  }

  /** `request` is absent for a request refused before its facts were read. */
  add(decision: Decision, request?: RequestSummary, now = Date.now()): LoggedDecision {
    this.measured = ENTRY_BYTES;
    const json = this.boundedDecision(decisionJson(decision));
    if (request) {
      json.endpoint = request.endpoint;
      json.stream = request.stream;
      // A client's header: cut like every other string.
      json.conversationId = request.conversationId === undefined ? null : this.boundedString(request.conversationId);
    }
    const entry: LoggedDecision = { at: now, decision: json };
    const size = this.measured;
    // Make room: the oldest go first, then (full ring) the slot this entry takes.
    while (this.count > 0 && (this.bytes + size > this.maxBytes || this.count === this.capacity)) this.dropOldest();
    this.ring[this.next] = entry;
    this.sizes[this.next] = size;
    this.bytes += size;
    this.count++;
    this.next = (this.next + 1) % this.capacity;
    if (this.stream.size > 0) this.stream.publish(() => shown(entry));
    return entry;
  }

  /** Entries held and their estimated bytes (tests, /admin/state). */
  usage(): { entries: number; bytes: number } {
    return { entries: this.count, bytes: this.bytes };
  }

  recent(limit: number): Record<string, unknown>[] {
    const out: Record<string, unknown>[] = [];
    for (let i = 1; i <= Math.min(limit, this.count); i++) {
      out.push(shown(this.ring[(this.next - i + this.capacity) % this.capacity]!));
    }
    return out;
  }

  private dropOldest(): void {
    const oldest = (this.next - this.count + this.capacity) % this.capacity;
    this.ring[oldest] = undefined;
    this.bytes -= this.sizes[oldest];
    this.count--;
  }

  /**
   * decisionJson's output (a fresh object: its own fields may be replaced) with
   * long strings cut. Its fields and the trace's steps are read by name: a
   * generic walk costs several times more, on every request.
   */
  private boundedDecision(json: Record<string, unknown>): Record<string, unknown> {
    const j = json as {
      requestId: unknown;
      tenant: unknown;
      model: unknown;
      version: unknown;
      adapter: unknown;
      pool: unknown;
      replica: unknown;
      reason: unknown;
      error?: unknown;
      action?: unknown;
      trace: DecisionTrace;
    };
    let v: unknown;
    if ((v = this.boundedValue(j.requestId)) !== j.requestId) j.requestId = v;
    if ((v = this.boundedValue(j.tenant)) !== j.tenant) j.tenant = v;
    if ((v = this.boundedValue(j.model)) !== j.model) j.model = v;
    if ((v = this.boundedValue(j.version)) !== j.version) j.version = v;
    if ((v = this.boundedValue(j.adapter)) !== j.adapter) j.adapter = v;
    if ((v = this.boundedValue(j.pool)) !== j.pool) j.pool = v;
    if ((v = this.boundedValue(j.replica)) !== j.replica) j.replica = v;
    if ((v = this.boundedValue(j.reason)) !== j.reason) j.reason = v;
    if (j.error !== undefined) j.error = this.bounded(j.error, 1);
    if (j.action !== undefined) j.action = this.bounded(j.action, 1);
    // The trace is the decision's own: copied only where a string was cut.
    const trace = j.trace;
    const tenant = this.step(0, trace.tenant);
    const model = this.step(1, trace.model);
    const pool = this.step(2, trace.pool);
    const replica = this.step(3, trace.replica);
    const admit = this.step(4, trace.admit);
    if (tenant !== trace.tenant || model !== trace.model || pool !== trace.pool || replica !== trace.replica || admit !== trace.admit) {
      j.trace = { ...trace, tenant, model, pool, replica, admit };
    }
    return json;
  }

  /**
   * The step at trace position `at`, bounded. A policy's tenant, model and
   * pool steps are often the very same objects request after request: the
   * last one at each position is bounded once, its size remembered.
   */
  private step(at: number, step: StepTrace | undefined): StepTrace | undefined {
    if (!step) return step;
    if (step === this.lastSteps[at]) {
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

/** An entry as /admin/decisions and the live stream show it. */
function shown(entry: LoggedDecision): Record<string, unknown> {
  return { at: new Date(entry.at).toISOString(), ...(entry.outcome ? { outcome: truncated(entry.outcome) } : {}), ...entry.decision };
}

/**
 * The head of a long string, as a fresh string: a slice of a long string is a
 * view that keeps the whole original alive, which is what must not be kept.
 */
export function truncated(text: string): string {
  if (text.length <= MAX_STRING_CHARS) return text;
  return Buffer.from(`${text.slice(0, MAX_STRING_CHARS)}… (${text.length - MAX_STRING_CHARS} more characters)`, 'utf16le').toString('utf16le');
}
