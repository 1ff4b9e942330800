// Everything known about one replica: the last scraped signals and when they
// were scraped, its health, the router's own in-flight count and the
// operator's draining flag. No I/O here: LiveFleet feeds it; the request path
// reads the frozen snapshot it keeps, rebuilt only when something changed.
import type { Engine } from '../../sdk/types.ts';
import { prefixHitRatioSince, type EngineSignals, type PrefixWindow } from './engine-signals.ts';
import { HealthTracker, type CheckOutcome, type HealthChange, type HealthPolicy, type ProbedHealth } from './health.ts';
import { OutlierDetector, type Ejection, type OutlierSettings, type UpstreamOutcome } from './outlier.ts';
import type { ReplicaHealth, ReplicaState } from './types.ts';

export interface ReplicaTarget {
  readonly id: string;
  /** Base URL of the engine's HTTP server: /metrics and /health are under it. */
  readonly url: string;
  readonly engine: Engine;
  /** The engine's API key (api_key_env), sent to /metrics and /health as a bearer token. */
  readonly apiKey?: string;
}

/** One replica as an admin endpoint shows it; `null` where nothing is known yet (JSON has no undefined). */
export interface ReplicaReport {
  readonly id: string;
  readonly url: string;
  readonly engine: Engine;
  readonly health: ReplicaHealth;
  /** What the health checks found, draining aside. */
  readonly probedHealth: ProbedHealth;
  readonly draining: boolean;
  readonly inFlight: number;
  /** Prompt tokens sent here by this router that have not reached their first byte. */
  readonly prefillTokens: number;
  /** Streams this router has open here. */
  readonly activeStreams: number;
  readonly running: number | null;
  readonly queueDepth: number | null;
  readonly kvUsage: number | null;
  readonly loadedAdapters: readonly string[] | null;
  readonly runningAdapters: readonly string[] | null;
  readonly waitingAdapters: readonly string[] | null;
  /** Engine wall-clock ms of its latest LoRA report (the engine's clock, not ours). */
  readonly adaptersReportedAt: number | null;
  readonly maxLoras: number | null;
  readonly prefixCacheHitRatio: number | null;
  readonly blockSize: number | null;
  readonly numGpuBlocks: number | null;
  readonly kvCapacityTokens: number | null;
  readonly scrapedAt: number | null;
  /** How old the scraped signals are; grows while scrapes fail. */
  readonly scrapeAgeMs: number | null;
  readonly checkedAt: number | null;
  readonly checkAgeMs: number | null;
  readonly consecutiveCheckFailures: number;
  readonly consecutiveCheckSuccesses: number;
  readonly consecutiveScrapeFailures: number;
  readonly lastCheckError: string | null;
  readonly lastScrapeError: string | null;
  /** Unreadable lines among the series read from the last page. */
  readonly skippedLines: number;
  /** Passive health: proxied attempts that failed in a row, all kinds and connect/timeout/protocol only. */
  readonly consecutiveUpstreamFailures: number;
  readonly consecutiveGatewayFailures: number;
  /** The current ejection and why; null while in rotation. */
  readonly ejection: Ejection | null;
}

export class WatchedReplica {
  private readonly tracker: HealthTracker;
  private readonly outlier = new OutlierDetector();
  private signals: EngineSignals = {};
  private scrapedAt: number | undefined;
  private checkedAt: number | undefined;
  private prefixWindow: PrefixWindow | undefined;
  private prefixCacheHitRatio: number | undefined;
  private skippedLines = 0;
  private scrapeFailures = 0;
  private lastScrapeError: string | undefined;
  private lastCheckError: string | undefined;
  private inFlight = 0;
  /** Load in tokens (docs/policies.md, "Load in tokens"): prompt tokens before their first byte, open streams. */
  private prefillTokens = 0;
  private activeStreams = 0;
  private draining = false;
  private view: ReplicaState | undefined;

  constructor(
    readonly target: ReplicaTarget,
    policy: HealthPolicy,
    /** Told each time the state the router reads changes (LiveFleet's change feed). */
    private readonly onChange?: (id: string) => void,
  ) {
    this.tracker = new HealthTracker(policy);
  }

  private invalidate(): void {
    this.view = undefined;
    this.onChange?.(this.target.id);
  }

  /** The snapshot the router reads: frozen, and the same object until something changes. */
  state(): ReplicaState {
    this.view ??= this.buildView();
    return this.view;
  }

  /**
   * Counts a request the router sent here; the returned function ends it and
   * does nothing when called again. Bound to this replica object, so a
   * request that outlives a policy reload cannot miscount its successor.
   */
  acquire(): () => void {
    this.inFlight++;
    this.invalidate();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.release();
    };
  }

  /** Counts `tokens` of prompt sent here until the returned function runs (the first byte, or the end); idempotent. */
  startPrefill(tokens: number): () => void {
    if (!(tokens > 0)) return noop;
    this.prefillTokens += tokens;
    this.invalidate();
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.prefillTokens = Math.max(0, this.prefillTokens - tokens);
      this.invalidate();
    };
  }

  /** Counts an open stream until the returned function runs; idempotent. */
  startStream(): () => void {
    this.activeStreams++;
    this.invalidate();
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.activeStreams = Math.max(0, this.activeStreams - 1);
      this.invalidate();
    };
  }

  release(): void {
    if (this.inFlight === 0) return; // never negative, even on a stray release
    this.inFlight--;
    this.invalidate();
  }

  setDraining(draining: boolean): void {
    if (this.draining === draining) return;
    this.draining = draining;
    this.invalidate();
  }

  /** Records a successful scrape started at `at`; returns how many failed scrapes it ends. */
  recordScrape(signals: EngineSignals, at: number, skippedLines: number): number {
    for (const list of [signals.loadedAdapters, signals.runningAdapters, signals.waitingAdapters]) {
      if (list) Object.freeze(list);
    }
    this.signals = signals;
    this.scrapedAt = at;
    this.skippedLines = skippedLines;
    this.updatePrefixRatio(signals);
    const ended = this.scrapeFailures;
    this.scrapeFailures = 0;
    this.lastScrapeError = undefined;
    this.invalidate();
    return ended;
  }

  /**
   * A failed scrape keeps the previous values and their old `scrapedAt`, so
   * their age grows and the router stops trusting them past its staleness
   * limit. Returns true for the first failure of a run (worth a log line).
   */
  recordScrapeFailure(error: string): boolean {
    this.scrapeFailures++;
    this.lastScrapeError = error;
    return this.scrapeFailures === 1;
  }

  /** Records a health check; returns the health change it caused and the ejection a passing check ended. */
  recordCheck(outcome: CheckOutcome, at: number, error?: string): { change?: HealthChange; returned?: Ejection } {
    this.checkedAt = at;
    this.lastCheckError = outcome === 'ok' ? undefined : error;
    const change = this.observe(outcome);
    // Back from an ejection only on a check that passes after the back-off.
    const returned = outcome === 'ok' && this.tracker.health === 'ready' ? this.outlier.healthy(at) : undefined;
    return { change, returned };
  }

  /** A failure seen outside the health checks (the proxy could not connect). */
  recordFailure(error: string): HealthChange | undefined {
    this.lastCheckError = error;
    return this.observe('error');
  }

  get ejected(): boolean {
    return this.outlier.ejection !== undefined;
  }

  /**
   * Counts how a proxied attempt ended; true when that reaches an ejection
   * threshold (the fleet decides whether the pool can spare the replica).
   * Snapshot untouched: health changes only on eject().
   */
  recordUpstream(outcome: UpstreamOutcome, settings: OutlierSettings): boolean {
    return this.outlier.record(outcome, settings);
  }

  eject(cause: Ejection['cause'], detail: string, now: number, settings: OutlierSettings): Ejection {
    this.invalidate();
    return this.outlier.eject(cause, detail, now, settings);
  }

  report(now: number): ReplicaReport {
    const s = this.signals;
    return {
      id: this.target.id,
      url: this.target.url,
      engine: this.target.engine,
      health: this.health(),
      probedHealth: this.tracker.health,
      draining: this.draining,
      inFlight: this.inFlight,
      prefillTokens: this.prefillTokens,
      activeStreams: this.activeStreams,
      running: s.running ?? null,
      queueDepth: s.queueDepth ?? null,
      kvUsage: s.kvUsage ?? null,
      loadedAdapters: s.loadedAdapters ?? null,
      runningAdapters: s.runningAdapters ?? null,
      waitingAdapters: s.waitingAdapters ?? null,
      adaptersReportedAt: s.adaptersReportedAt ?? null,
      maxLoras: s.maxLoras ?? null,
      prefixCacheHitRatio: this.prefixCacheHitRatio ?? null,
      blockSize: s.blockSize ?? null,
      numGpuBlocks: s.numGpuBlocks ?? null,
      kvCapacityTokens: s.kvCapacityTokens ?? null,
      scrapedAt: this.scrapedAt ?? null,
      scrapeAgeMs: this.scrapedAt === undefined ? null : Math.max(0, now - this.scrapedAt),
      checkedAt: this.checkedAt ?? null,
      checkAgeMs: this.checkedAt === undefined ? null : Math.max(0, now - this.checkedAt),
      consecutiveCheckFailures: this.tracker.consecutiveFailures,
      consecutiveCheckSuccesses: this.tracker.consecutiveSuccesses,
      consecutiveScrapeFailures: this.scrapeFailures,
      lastCheckError: this.lastCheckError ?? null,
      lastScrapeError: this.lastScrapeError ?? null,
      skippedLines: this.skippedLines,
      consecutiveUpstreamFailures: this.outlier.consecutiveFailures,
      consecutiveGatewayFailures: this.outlier.consecutiveGatewayFailures,
      ejection: this.outlier.ejection ?? null,
    };
  }

  private observe(outcome: CheckOutcome): HealthChange | undefined {
    const change = this.tracker.observe(outcome);
    this.invalidate(); // checkedAt moved even when health did not
    return change;
  }

  /** Draining first (the operator's word), then what active checks found, then passive ejection. */
  private health(): ReplicaHealth {
    if (this.draining) return 'draining';
    const probed = this.tracker.health;
    return this.outlier.ejection && (probed === 'ready' || probed === 'unknown') ? 'ejected' : probed;
  }

  private updatePrefixRatio(signals: EngineSignals): void {
    if (signals.prefixCacheHitRate !== undefined) {
      this.prefixCacheHitRatio = signals.prefixCacheHitRate;
      return;
    }
    const { prefixCacheHits: hits, prefixCacheQueries: queries } = signals;
    if (hits === undefined || queries === undefined) {
      this.prefixCacheHitRatio = undefined;
      this.prefixWindow = undefined;
      return;
    }
    this.prefixCacheHitRatio = prefixHitRatioSince(this.prefixWindow, hits, queries);
    this.prefixWindow = { hits, queries, ratio: this.prefixCacheHitRatio };
  }

  private buildView(): ReplicaState {
    const s = this.signals;
    const view: { -readonly [K in keyof ReplicaState]: ReplicaState[K] } = {
      health: this.health(),
      inFlight: this.inFlight,
    };
    if (this.prefillTokens > 0) view.prefillTokens = this.prefillTokens;
    if (this.activeStreams > 0) view.activeStreams = this.activeStreams;
    // Absent rather than undefined: a signal the engine never gave is not a value.
    if (s.kvUsage !== undefined) view.kvUsage = s.kvUsage;
    if (s.queueDepth !== undefined) view.queueDepth = s.queueDepth;
    if (s.running !== undefined) view.running = s.running;
    if (s.loadedAdapters !== undefined) view.loadedAdapters = s.loadedAdapters;
    if (this.scrapedAt !== undefined) view.scrapedAt = this.scrapedAt;
    if (this.checkedAt !== undefined) view.checkedAt = this.checkedAt;
    if (s.maxLoras !== undefined) view.maxLoras = s.maxLoras;
    if (this.prefixCacheHitRatio !== undefined) view.prefixCacheHitRatio = this.prefixCacheHitRatio;
    if (s.numGpuBlocks !== undefined) view.numGpuBlocks = s.numGpuBlocks;
    if (s.kvCapacityTokens !== undefined) view.kvCapacityTokens = s.kvCapacityTokens;
    return Object.freeze(view);
  }
}

function noop(): void {}
