// The most recent decisions, newest first, for /admin/decisions: when routing
// goes wrong you need to see the decision. A fixed ring: memory stays bounded.
import { decisionJson, type Decision } from '../decide/decide.ts';
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

export class DecisionLog {
  private readonly ring: (LoggedDecision | undefined)[];
  private next = 0;

  constructor(readonly capacity = 1000) {
    this.ring = new Array(capacity);
  }

  /** Watchers of new decisions (the explorer's live stream). */
  readonly stream = new DecisionStream();

  add(decision: Decision, now = Date.now()): LoggedDecision {
    const entry: LoggedDecision = { at: now, decision: decisionJson(decision) };
    this.ring[this.next] = entry;
    this.next = (this.next + 1) % this.capacity;
    this.stream.publish(() => shown(entry));
    return entry;
  }

  recent(limit: number): Record<string, unknown>[] {
    const out: Record<string, unknown>[] = [];
    for (let i = 1; i <= Math.min(limit, this.capacity); i++) {
      const entry = this.ring[(this.next - i + this.capacity) % this.capacity];
      if (!entry) break;
      out.push(shown(entry));
    }
    return out;
  }
}

/** An entry as /admin/decisions and the live stream show it. */
function shown(entry: LoggedDecision): Record<string, unknown> {
  return { at: new Date(entry.at).toISOString(), ...(entry.outcome ? { outcome: entry.outcome } : {}), ...entry.decision };
}
