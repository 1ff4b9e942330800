// The FleetView of a running router: for every replica, a loop scrapes its
// /metrics and another checks its /health, both in the background and never
// overlapping themselves; the proxy adds its in-flight counts and connect
// errors, an operator or policy its draining flag. The request path only ever
// reads a ready-made snapshot.
import type { Logger } from '../../sdk/types.ts';
import { ChangeLog } from './change-log.ts';
import { ENGINE_METRIC_NAMES, extractSignals, hasLoadSignals } from './engine-signals.ts';
import type { CheckOutcome, HealthChange } from './health.ts';
import type { Ejection, OutlierSettings, UpstreamOutcome } from './outlier.ts';
import { PollLoop } from './poll-loop.ts';
import { ReplicaClient } from './replica-client.ts';
import { ReplicaHistory } from './replica-history.ts';
import type { FleetView, ReplicaState } from './types.ts';
import { WatchedReplica, type ReplicaReport, type ReplicaTarget } from './watched-replica.ts';

export type { ReplicaReport, ReplicaTarget } from './watched-replica.ts';

/** The pool a proxied attempt belonged to, as outlier detection needs it: its members and its settings. */
export interface OutlierScope {
  readonly key: string;
  readonly replicas: readonly { readonly id: string }[];
  readonly outlier: OutlierSettings;
}

/** An ejection or a return, for metrics and logs. */
export interface EjectionEvent {
  readonly replica: string;
  readonly pool: string;
  readonly ejection: Ejection;
}

export interface LiveFleetOptions {
  readonly replicas: readonly ReplicaTarget[];
  /** How often each replica's /metrics is scraped. Default 1000 ms. */
  readonly scrapeIntervalMs?: number;
  /** How often each replica's /health is checked. Default 1000 ms. */
  readonly healthIntervalMs?: number;
  /** Consecutive failures (checks or reported connect errors) that make a replica `failing`. Default 2. */
  readonly failAfter?: number;
  /** Consecutive successful checks that bring a `failing` replica back. Default 2. */
  readonly recoverAfter?: number;
  /** Deadline of one scrape or check, connect to last byte. Default 1000 ms. */
  readonly requestTimeoutMs?: number;
  /** The clock that stamps `scrapedAt` and `checkedAt` (ms). Default Date.now. */
  readonly now?: () => number;
  readonly log?: Logger;
  /** Called when outlier detection ejects a replica (metrics). */
  readonly onEjection?: (event: EjectionEvent) => void;
}

export const LIVE_FLEET_DEFAULTS = {
  scrapeIntervalMs: 1000,
  healthIntervalMs: 1000,
  // Two misses a second apart pull a dead replica within ~2 s, while one slow
  // answer (a GC pause, a long prefill hogging the API thread) does not.
  failAfter: 2,
  recoverAfter: 2,
  requestTimeoutMs: 1000,
} as const;

const METRICS_PATH = '/metrics';
const HEALTH_PATH = '/health';

interface Watch {
  readonly replica: WatchedReplica;
  client?: ReplicaClient;
  loops: PollLoop[];
}

export class LiveFleet implements FleetView {
  private readonly watches = new Map<string, Watch>();
  private readonly settings: Required<Omit<LiveFleetOptions, 'replicas' | 'log' | 'onEjection'>>;
  private readonly log: Logger | undefined;
  private readonly onEjection: LiveFleetOptions['onEjection'];
  /** The pool each ejected replica was ejected from: named again when it returns. */
  private readonly ejectedFrom = new Map<string, string>();
  private started = false;
  /** Every change to a replica's state, for decisions to revisit only what moved (FleetView.changes). */
  readonly changes = new ChangeLog();
  /** Each replica's recent load, sampled every five scrape intervals while started (the explorer's Fleet tab). */
  readonly history: ReplicaHistory;
  private historyTimer: NodeJS.Timeout | undefined;

  constructor(options: LiveFleetOptions) {
    this.settings = {
      scrapeIntervalMs: positive('scrapeIntervalMs', options.scrapeIntervalMs ?? LIVE_FLEET_DEFAULTS.scrapeIntervalMs),
      healthIntervalMs: positive('healthIntervalMs', options.healthIntervalMs ?? LIVE_FLEET_DEFAULTS.healthIntervalMs),
      failAfter: count('failAfter', options.failAfter ?? LIVE_FLEET_DEFAULTS.failAfter),
      recoverAfter: count('recoverAfter', options.recoverAfter ?? LIVE_FLEET_DEFAULTS.recoverAfter),
      requestTimeoutMs: positive('requestTimeoutMs', options.requestTimeoutMs ?? LIVE_FLEET_DEFAULTS.requestTimeoutMs),
      now: options.now ?? Date.now,
    };
    this.log = options.log;
    this.onEjection = options.onEjection;
    this.history = new ReplicaHistory(5 * this.settings.scrapeIntervalMs);
    this.update(options.replicas);
  }

  replica(id: string): ReplicaState | undefined {
    return this.watches.get(id)?.replica.state();
  }

  /** Every replica with its signals and their ages, in the order given. */
  list(): ReplicaReport[] {
    const now = this.settings.now();
    return [...this.watches.values()].map((w) => w.replica.report(now));
  }

  /** Starts scraping and checking every replica. Calling it again does nothing. */
  start(): void {
    if (this.started) return;
    this.started = true;
    for (const watch of this.watches.values()) this.startWatch(watch);
    this.historyTimer = setInterval(() => this.history.record(this.settings.now(), this.list()), this.history.intervalMs).unref();
  }

  /** Stops every loop, aborts requests in flight and closes connections; start() may follow. */
  async stop(): Promise<void> {
    this.started = false;
    clearInterval(this.historyTimer);
    await Promise.all([...this.watches.values()].map((w) => this.stopWatch(w)));
  }

  /**
   * Changes the replica set (a policy reload). A replica that stays with the
   * same URL and engine keeps its signals, health, counts and draining flag;
   * one whose URL or engine changed starts afresh; a removed one is stopped
   * and forgotten.
   */
  update(replicas: readonly ReplicaTarget[]): void {
    const next = new Map<string, ReplicaTarget>();
    for (const target of replicas) {
      checkTarget(target);
      if (next.has(target.id)) throw new Error(`replica '${target.id}' is listed twice`);
      next.set(target.id, target);
    }
    for (const [id, watch] of this.watches) {
      const target = next.get(id);
      if (target && target.url === watch.replica.target.url && target.engine === watch.replica.target.engine && target.apiKey === watch.replica.target.apiKey)
        continue;
      this.watches.delete(id);
      this.ejectedFrom.delete(id);
      this.changes.record(id);
      void this.stopWatch(watch);
    }
    for (const [id, target] of next) {
      if (this.watches.has(id)) continue;
      const watch: Watch = {
        replica: new WatchedReplica(target, { failAfter: this.settings.failAfter, recoverAfter: this.settings.recoverAfter }, (changed) =>
          this.changes.record(changed),
        ),
        loops: [],
      };
      this.watches.set(id, watch);
      this.changes.record(id);
      if (this.started) this.startWatch(watch);
    }
    // Keep list() in the order the policy gives.
    const ordered = [...next.keys()].map((id) => [id, this.watches.get(id)!] as const);
    this.watches.clear();
    for (const [id, watch] of ordered) this.watches.set(id, watch);
  }

  /**
   * Counts a request sent to `id`. Prefer the returned function to end it:
   * it is idempotent and stays bound to this replica across reloads.
   * An unknown id is counted nowhere (the request path must not throw).
   */
  acquire(id: string): () => void {
    return this.watches.get(id)?.replica.acquire() ?? noop;
  }

  /** Prompt tokens sent to `id`, counted until their first byte (the returned function). */
  startPrefill(id: string, tokens: number): () => void {
    return this.watches.get(id)?.replica.startPrefill(tokens) ?? noop;
  }

  /** A stream open on `id`, counted until the returned function runs. */
  startStream(id: string): () => void {
    return this.watches.get(id)?.replica.startStream() ?? noop;
  }

  /** Ends a request counted on `id`; the count never goes below zero. */
  release(id: string): void {
    this.watches.get(id)?.replica.release();
  }

  /** Takes a replica out of rotation (or puts it back) without touching its checks. Returns false for an unknown id. */
  setDraining(id: string, draining: boolean): boolean {
    const watch = this.watches.get(id);
    if (!watch) return false;
    watch.replica.setDraining(draining);
    this.log?.info(draining ? 'fleet: replica draining' : 'fleet: replica no longer draining', { replica: id });
    return true;
  }

  /** The proxy could not reach `id`: counts as a failed check now, without waiting for the next one. */
  markFailure(id: string, error = 'reported by the proxy'): void {
    const watch = this.watches.get(id);
    if (!watch) return;
    this.logChange(watch.replica, watch.replica.recordFailure(error), error);
  }

  /**
   * Passive health: how a proxied attempt on `id` ended. Enough failures in a
   * row eject the replica, unless the pool already has its most ejected at
   * once (max ejection percent, at least one). Cheap for a success on a
   * clean record: it runs for every request.
   */
  recordUpstream(id: string, outcome: UpstreamOutcome, scope: OutlierScope, detail = ''): void {
    const replica = this.watches.get(id)?.replica;
    if (!replica || !replica.recordUpstream(outcome, scope.outlier) || outcome === 'success') return;
    const settings = scope.outlier;
    const allowed = Math.max(1, Math.floor((scope.replicas.length * settings.maxEjectionPercent) / 100));
    let ejected = 0;
    for (const member of scope.replicas) if (this.watches.get(member.id)?.replica.ejected) ejected++;
    if (ejected >= allowed) {
      this.log?.warn('fleet: replica not ejected: its pool has the most ejected at once', {
        replica: id,
        pool: scope.key,
        cause: outcome,
        ejected,
        maxEjectionPercent: settings.maxEjectionPercent,
      });
      return;
    }
    const ejection = replica.eject(outcome, detail, this.settings.now(), settings);
    this.ejectedFrom.set(id, scope.key);
    this.log?.warn('fleet: replica ejected', {
      replica: id,
      pool: scope.key,
      cause: outcome,
      detail,
      ejectionMs: ejection.until - ejection.ejectedAt,
      multiplier: ejection.multiplier,
    });
    this.onEjection?.({ replica: id, pool: scope.key, ejection });
  }

  private startWatch(watch: Watch): void {
    const client = new ReplicaClient(watch.replica.target.url, this.settings.requestTimeoutMs, watch.replica.target.apiKey);
    watch.client = client;
    watch.loops = [
      new PollLoop((signal) => this.scrape(watch.replica, client, signal), this.settings.scrapeIntervalMs),
      new PollLoop((signal) => this.check(watch.replica, client, signal), this.settings.healthIntervalMs),
    ];
    for (const loop of watch.loops) loop.start();
  }

  private async stopWatch(watch: Watch): Promise<void> {
    for (const loop of watch.loops) loop.stop();
    watch.loops = [];
    const client = watch.client;
    watch.client = undefined;
    await client?.close().catch(() => undefined);
  }

  private async scrape(replica: WatchedReplica, client: ReplicaClient, signal: AbortSignal): Promise<void> {
    const { id, engine } = replica.target;
    // Stamped at the start: the values are at least this old, never younger.
    const startedAt = this.settings.now();
    let error: string;
    try {
      const names = ENGINE_METRIC_NAMES[engine];
      const answer = await client.getMetrics(METRICS_PATH, signal, { keep: (name) => names.has(name) });
      if (answer.page) {
        const page = answer.page;
        const signals = extractSignals(engine, page.samples);
        if (hasLoadSignals(signals)) {
          const ended = replica.recordScrape(signals, startedAt, page.skipped);
          if (ended > 0) this.log?.info('fleet: scrape recovered', { replica: id, failedScrapes: ended });
          return;
        }
        error = `no ${engine} load metrics on the page (is the engine right?)`;
      } else {
        error = `HTTP ${answer.status}`;
      }
    } catch (err) {
      if (signal.aborted) return; // stopped or removed: not the replica's fault
      error = describe(err);
    }
    if (replica.recordScrapeFailure(error)) this.log?.warn('fleet: scrape failed', { replica: id, error });
  }

  private async check(replica: WatchedReplica, client: ReplicaClient, signal: AbortSignal): Promise<void> {
    let outcome: CheckOutcome;
    let error: string | undefined;
    try {
      const answer = await client.get(HEALTH_PATH, signal, false);
      outcome = answer.status >= 200 && answer.status < 300 ? 'ok' : 'unready';
      if (outcome !== 'ok') error = `HTTP ${answer.status}`;
    } catch (err) {
      if (signal.aborted) return;
      outcome = 'error';
      error = describe(err);
    }
    const { change, returned } = replica.recordCheck(outcome, this.settings.now(), error);
    this.logChange(replica, change, error);
    if (returned) {
      const id = replica.target.id;
      this.log?.info('fleet: replica back from ejection (health check passed)', {
        replica: id,
        pool: this.ejectedFrom.get(id),
        cause: returned.cause,
        ejectedForMs: this.settings.now() - returned.ejectedAt,
      });
      this.ejectedFrom.delete(id);
    }
  }

  private logChange(replica: WatchedReplica, change: HealthChange | undefined, error: string | undefined): void {
    if (!change || !this.log) return;
    const fields = { replica: replica.target.id, from: change.from, to: change.to, ...(error ? { error } : {}) };
    if (change.to === 'ready') this.log.info('fleet: replica ready', fields);
    else this.log.warn(`fleet: replica ${change.to}`, fields);
  }
}

function noop(): void {}

function checkTarget(target: ReplicaTarget): void {
  if (!target.id) throw new Error('a replica needs an id');
  let url: URL;
  try {
    url = new URL(target.url);
  } catch {
    throw new Error(`replica '${target.id}': '${target.url}' is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new Error(`replica '${target.id}': '${target.url}' is not an http(s) URL`);
  }
  if (!Object.hasOwn(ENGINE_METRIC_NAMES, target.engine)) {
    throw new Error(`replica '${target.id}': unknown engine '${String(target.engine)}' (vllm or sglang)`);
  }
}

function positive(name: string, value: number): number {
  if (!(value > 0) || !Number.isFinite(value)) throw new RangeError(`${name} must be a positive number of ms, got ${value}`);
  return value;
}

function count(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`${name} must be a whole number ≥ 1, got ${value}`);
  return value;
}

/** One line for a log or the admin view: undici's code and message, or the cause's. */
function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: unknown }).code;
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
  const message = `${err.message}${cause}`;
  return typeof code === 'string' && !message.includes(code) ? `${code} ${message}` : message;
}
