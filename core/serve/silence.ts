// Ejection on silence (docs/reliability.md, "Silent replicas"): a replica
// that sends no first byte while its peers in the pool do is failing, even
// when no timeout of its own has fired yet and even when its clients leave
// first. This file keeps, per pool, what "answering" looks like: the peers'
// recent time to first byte (per token budget without streaming, where the
// headers come only with the whole answer) and when each replica last
// answered. The proxy asks it for an attempt's deadline and whether a silence
// counts. No I/O, no timers: the attempt holds its own deadline timer.

/** Answers kept per pool and kind: the deadline follows the last minute or so of traffic. */
const SAMPLES = 64;
/**
 * Fewer answers than this in a pool and kind: no adaptive deadline yet. Few
 * are needed: the deadline is four times their 95th percentile (with so few,
 * their slowest) per token of budget, never under the floor, and it takes
 * three silences in a row to eject.
 */
const MIN_SAMPLES = 3;
/** The deadline is this many times the peers' 95th percentile... */
export const SILENCE_FACTOR = 4;
/** ...and never shorter than this (an engine's GC pause, a burst of prefills). */
export const SILENCE_FLOOR_MS = 2000;
/** A client that left before the first byte counts only after waiting at least this long (and as long as peers take). */
const ABANDON_FLOOR_MS = 1000;
/** Pools tracked at most (reloads rename pools; the oldest is forgotten). */
const MAX_POOLS = 1024;

/** Answers between two sorts of a full window: a deadline four times the p95 needs no fresher p95, and a sort per request was a per-request cost. */
const RESORT_EVERY = 8;

/** The 95th percentile of the last SAMPLES values, recomputed lazily (while the window fills, at every answer; then every RESORT_EVERY). */
class Recent {
  private readonly values = new Float64Array(SAMPLES);
  private readonly sorted = new Float64Array(SAMPLES);
  private count = 0;
  private next = 0;
  private sinceSort = 0;
  private p95: number | undefined;

  add(value: number): void {
    this.values[this.next] = value;
    this.next = (this.next + 1) % SAMPLES;
    if (this.count < SAMPLES) this.count++;
    if (this.count < SAMPLES || ++this.sinceSort >= RESORT_EVERY) this.p95 = undefined;
  }

  percentile95(): number | undefined {
    if (this.count < MIN_SAMPLES) return undefined;
    if (this.p95 === undefined) {
      const sorted = this.sorted.subarray(0, this.count);
      sorted.set(this.values.subarray(0, this.count));
      sorted.sort(); // a typed array sorts numerically, with no comparator call per pair
      this.p95 = sorted[Math.min(this.count - 1, Math.floor(this.count * 0.95))];
      this.sinceSort = 0;
    }
    return this.p95;
  }
}

class PoolAnswers {
  /** Streams: milliseconds to the response headers (engines send them before the first token). */
  readonly stream = new Recent();
  /** Without streaming: milliseconds to the headers per token of budget (max_tokens, or the default). */
  readonly unary = new Recent();
  /** performance.now() of each replica's latest first byte. */
  readonly lastAnswer = new Map<string, number>();
}

/** What an attempt needs to know to be judged: its pool, its kind and its token budget. */
export interface SilenceKey {
  readonly pool: string;
  readonly stream: boolean;
  /** max_tokens of the request, or the settings' default_max_tokens. */
  readonly tokenBudget: number;
}

export class SilenceWatch {
  private readonly pools = new Map<string, PoolAnswers>();

  private answers(pool: string): PoolAnswers {
    let answers = this.pools.get(pool);
    if (!answers) {
      if (this.pools.size >= MAX_POOLS) this.pools.delete(this.pools.keys().next().value!);
      this.pools.set(pool, (answers = new PoolAnswers()));
    }
    return answers;
  }

  /** A replica's first byte arrived `ttfbMs` after its attempt started. */
  answered(key: SilenceKey, replica: string, ttfbMs: number, now = performance.now()): void {
    const answers = this.answers(key.pool);
    answers.lastAnswer.set(replica, now);
    if (key.stream) answers.stream.add(ttfbMs);
    else answers.unary.add(ttfbMs / Math.max(1, key.tokenBudget));
  }

  /** How long the pool's replicas take, at the 95th percentile, to a first byte for a request like this; undefined until enough answers. */
  expectedMs(key: SilenceKey): number | undefined {
    const answers = this.pools.get(key.pool);
    if (!answers) return undefined;
    if (key.stream) return answers.stream.percentile95();
    const perToken = answers.unary.percentile95();
    return perToken === undefined ? undefined : perToken * Math.max(1, key.tokenBudget);
  }

  /**
   * After how long without a first byte an attempt counts as a silence, or
   * undefined: too few answers to judge, or no earlier than the pool's own
   * timeout (`timeoutMs`), which then decides alone.
   */
  deadlineMs(key: SilenceKey, timeoutMs: number): number | undefined {
    const expected = this.expectedMs(key);
    if (expected === undefined) return undefined;
    const deadline = Math.max(SILENCE_FLOOR_MS, SILENCE_FACTOR * expected);
    return deadline < timeoutMs ? Math.ceil(deadline) : undefined;
  }

  /**
   * Whether an attempt without a first byte after `waitedMs` is silent now
   * ('silent': its deadline passed and its peers answered meanwhile), when to
   * ask again (ms: the deadline is still ahead, too few answers yet to
   * judge, or its peers have not answered either), or 'never' (its deadline would come no earlier than the pool's own
   * timeout). Asked again rather than fixed when the attempt starts: a pool
   * just started (or just reloaded) has its answers a moment later.
   */
  check(key: SilenceKey, replica: string, startedAt: number, waitedMs: number, timeoutMs: number): number | 'silent' | 'never' {
    if (SILENCE_FLOOR_MS >= timeoutMs) return 'never';
    if (this.expectedMs(key) === undefined) return waitedMs < SILENCE_FLOOR_MS ? Math.ceil(SILENCE_FLOOR_MS - waitedMs) : SILENCE_FLOOR_MS;
    const deadline = this.deadlineMs(key, timeoutMs);
    if (deadline === undefined) return 'never';
    if (waitedMs < deadline) return Math.ceil(deadline - waitedMs);
    // Its peers are as slow (a pool under a burst): not a silence of its own, yet.
    return this.peersAnsweredSince(key.pool, replica, startedAt) ? 'silent' : SILENCE_FLOOR_MS;
  }

  /** Whether a replica of the pool other than `replica` sent a first byte after `since` (performance.now()). */
  peersAnsweredSince(pool: string, replica: string, since: number): boolean {
    const answers = this.pools.get(pool);
    if (!answers) return false;
    for (const [peer, at] of answers.lastAnswer) if (peer !== replica && at > since) return true;
    return false;
  }

  /** Whether a client that left after `waitedMs` without a first byte from `replica` says the replica is silent. */
  abandonmentCounts(key: SilenceKey, replica: string, startedAt: number, waitedMs: number): boolean {
    if (waitedMs < ABANDON_FLOOR_MS) return false;
    const expected = this.expectedMs(key);
    if (expected !== undefined && waitedMs < expected) return false;
    return this.peersAnsweredSince(key.pool, replica, startedAt);
  }
}
