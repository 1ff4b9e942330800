// The router's one live reference to policy. A reload reads the policy
// directory, the plugins and the control plane's table completely off the
// hot path, builds and validates a whole new Snapshot, then swaps one
// reference; any problem keeps the current snapshot (last-known-good).
//
// A request acquires the snapshot at arrival and releases it when its last
// byte is out: a count per snapshot. A replaced snapshot's strategy
// instances are disposed exactly once, when the last request that started
// on it has released it.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Logger } from '../../sdk/index.ts';
import { PluginLoader, type LoadedPlugin } from '../plugins/loader.ts';
import type { CompileOptions } from './compile.ts';
import { ControlPlaneSource, type ControlPlaneOptions, type ControlPlaneStatus } from './control-plane.ts';
import { readPolicyInputs, type PolicyInputs } from './inputs.ts';
import { buildSnapshot } from './load.ts';
import type { RoutingTable } from './routing-table.ts';
import { strategyInstances, type Snapshot } from './snapshot.ts';
import { PolicyWatcher } from './watch.ts';
import { formatProblem, PolicyError, type PolicyProblem, displayPath } from '../diagnostics/problem.ts';

export interface PolicyStoreOptions {
  /** The policy directory. */
  readonly dir: string;
  /** Keeps compiled plugins across reloads; one per store unless shared on purpose. */
  readonly loader?: PluginLoader;
  /** The routing table from a control plane (see control-plane.ts), joined to the local files. */
  readonly controlPlane?: ControlPlaneOptions | ControlPlaneSource;
  /** Seeds every strategy's random source. */
  readonly seed?: number | string;
  /** The strategies' clock. */
  readonly now?: () => number;
  readonly log?: Logger;
  /** A replaced snapshot still held after this long is disposed anyway, with a warning. Default 15 min. */
  readonly drainTimeoutMs?: number;
  /** Watcher quiet time, and the wait before re-reading a file caught mid-save, ms. Default 100. */
  readonly debounceMs?: number;
  /** Poll the file system instead of native events (network file systems). */
  readonly usePolling?: boolean;
}

export type ReloadResult =
  /** A new snapshot is live. */
  | 'ok'
  /** Nothing changed (content hashes equal), or the same broken input was already reported. */
  | 'unchanged'
  /** Something is wrong: the current snapshot stays (last-known-good). */
  | 'error'
  /** A file changed while it was read (a save in progress): read again shortly. */
  | 'deferred';

// Types, not interfaces: plain JSON for /admin/state and /admin/reload (assignable to Record<string, unknown>).
export type ReloadOutcome = {
  readonly result: ReloadResult;
  readonly reason: string;
  /** The live generation after this reload. */
  readonly generation: number;
  /** The live content hash after this reload. */
  readonly hash: string;
  readonly durationMs: number;
  /** ISO time. */
  readonly at: string;
  /** Why it failed; for 'ok', why the newest control-plane table was not used (empty otherwise). */
  readonly problems: readonly PolicyProblem[];
  /** `problems` as FILE:LINE:COL: message lines. */
  readonly errors: readonly string[];
};

export interface SnapshotLease {
  readonly snapshot: Snapshot;
  /** Ends the request's hold on the snapshot; safe to call more than once. */
  release(): void;
}

export type PolicyStatus = {
  readonly generation: number;
  /** Over policy files, plugins and routing table. */
  readonly hash: string;
  /** Over the policy documents alone (Snapshot.hash). */
  readonly policyHash: string;
  /** ISO time the live snapshot was swapped in. */
  readonly loadedAt: string;
  readonly files: readonly string[];
  readonly plugins: readonly { readonly name: string; readonly version: string; readonly file: string; readonly hash: string }[];
  readonly pluginDirs: readonly string[];
  /** Requests holding the live snapshot. */
  readonly inFlight: number;
  /** Replaced snapshots still held by requests, waiting to be disposed. */
  readonly draining: readonly { readonly generation: number; readonly inFlight: number }[];
  readonly reloads: Readonly<Record<ReloadResult, number>>;
  readonly lastReload?: ReloadOutcome;
  /** The most recent failed reload, kept after later successes for the record. */
  readonly lastError?: ReloadOutcome;
  /** Directories being watched, or false. */
  readonly watching: readonly string[] | false;
  readonly controlPlane?: ControlPlaneStatus & { readonly tableInUse?: string; readonly tableInUseVersion?: string };
};

export interface SwapEvent {
  readonly snapshot: Snapshot;
  readonly previous?: Snapshot;
  readonly reason: string;
  readonly durationMs: number;
}

export interface DisposedEvent {
  readonly generation: number;
  readonly instances: number;
  /** True when the drain timeout ran out before every request released it. */
  readonly forced: boolean;
}

export interface PolicyStoreEvents {
  /** Every reload attempt, whatever its result: for switchyard_policy_reloads_total{result}. */
  reload: ReloadOutcome;
  /** A new snapshot is live: update the fleet's replica list from `snapshot.replicas`. */
  swap: SwapEvent;
  /** A replaced snapshot's strategy instances were disposed. */
  disposed: DisposedEvent;
  /** The control plane's state changed (ok, unreachable, invalid, rejected). */
  'control-plane': ControlPlaneStatus;
}

type Listener<K extends keyof PolicyStoreEvents> = (event: PolicyStoreEvents[K]) => void;

/** Re-reading a file caught mid-save gives up after this many tries. */
const MAX_DEFERRALS = 20;

/** One snapshot and the requests holding it. */
class Holder {
  refs = 0;
  retired = false;
  disposed = false;
  drainTimer?: NodeJS.Timeout;
  constructor(
    readonly snapshot: Snapshot,
    readonly onDrained: (holder: Holder) => void,
  ) {}
}

class Lease implements SnapshotLease {
  readonly snapshot: Snapshot;
  #holder: Holder | undefined;
  constructor(holder: Holder) {
    this.#holder = holder;
    this.snapshot = holder.snapshot;
  }
  release(): void {
    const holder = this.#holder;
    if (!holder) return;
    this.#holder = undefined;
    if (--holder.refs === 0 && holder.retired) holder.onDrained(holder);
  }
}

export class PolicyStore {
  readonly dir: string;
  readonly #loader: PluginLoader;
  readonly #ownsLoader: boolean;
  readonly #controlPlane?: ControlPlaneSource;
  readonly #options: PolicyStoreOptions;
  readonly #log?: Logger;
  #holder!: Holder;
  readonly #draining = new Set<Holder>();
  #inputsHash = '';
  #lastFailedHash?: string;
  #tableInUse?: RoutingTable;
  #plugins: readonly LoadedPlugin[] = [];
  #pluginDirs: readonly string[] = [];
  #loadedAt = 0;
  #lastReload?: ReloadOutcome;
  #lastError?: ReloadOutcome;
  readonly #counts: Record<ReloadResult, number> = { ok: 0, unchanged: 0, error: 0, deferred: 0 };
  #deferrals = 0;
  #retryTimer?: NodeJS.Timeout;
  #watcher?: PolicyWatcher;
  #tail: Promise<unknown> = Promise.resolve();
  #queued?: Promise<ReloadOutcome>;
  #closed = false;
  readonly #listeners: { [K in keyof PolicyStoreEvents]: Set<Listener<K>> } = {
    reload: new Set(),
    swap: new Set(),
    disposed: new Set(),
    'control-plane': new Set(),
  };
  readonly #onDrained = (holder: Holder) => this.#dispose(holder, false);

  /** Loads the policy (asking the control plane first, when there is one). Throws PolicyError when the first load fails: there is no last-known-good yet. */
  static async open(options: PolicyStoreOptions): Promise<PolicyStore> {
    const store = new PolicyStore(options);
    await store.#start();
    return store;
  }

  private constructor(options: PolicyStoreOptions) {
    this.dir = resolve(options.dir);
    this.#options = options;
    this.#log = options.log;
    this.#loader = options.loader ?? new PluginLoader();
    this.#ownsLoader = options.loader === undefined;
    const cp = options.controlPlane;
    if (cp) this.#controlPlane = cp instanceof ControlPlaneSource ? cp : new ControlPlaneSource({ log: options.log, ...cp });
  }

  async #start(): Promise<void> {
    const cp = this.#controlPlane;
    if (cp) {
      cp.onStatus((status) => this.#emit('control-plane', status));
      await cp.start();
      cp.onChange(() => void this.reload('control plane: new routing table'));
    }
    let first = await this.reload('initial load');
    while (first.result === 'deferred') {
      clearTimeout(this.#retryTimer);
      await new Promise((done) => setTimeout(done, this.#options.debounceMs ?? 100));
      first = await this.reload('initial load (re-read)');
    }
    if (first.result !== 'ok') {
      cp?.stop();
      clearTimeout(this.#retryTimer);
      if (this.#ownsLoader) this.#loader.clearCacheDir();
      const problems = first.problems.length ? [...first.problems] : [{ file: displayPath(this.dir), line: 1, col: 1, message: 'policy files kept changing while being read' }];
      if (cp && !cp.table()) problems.unshift({ file: cp.url, line: 1, col: 1, message: `no routing table yet: ${cp.status().errors.join('; ') || 'none served'}` });
      throw new PolicyError(problems);
    }
  }

  /** The live snapshot. For a request, prefer acquire(): it keeps the snapshot's strategies alive until release. */
  current(): Snapshot {
    return this.#holder.snapshot;
  }

  /** Holds the live snapshot for one request. Cheap: a count and one small object. */
  acquire(): SnapshotLease {
    const holder = this.#holder;
    holder.refs++;
    return new Lease(holder);
  }

  /** Plugins of the live snapshot. */
  get plugins(): readonly LoadedPlugin[] {
    return this.#plugins;
  }

  /**
   * Reads, validates and (when anything changed) swaps. Reloads run one at
   * a time; calls made while one runs share the next run.
   */
  reload(reason = 'manual'): Promise<ReloadOutcome> {
    if (this.#queued) return this.#queued;
    const run = this.#tail.then(() => {
      this.#queued = undefined;
      return this.#reloadNow(reason);
    });
    this.#queued = run;
    this.#tail = run.catch(() => {});
    return run;
  }

  /** Each new live snapshot (shorthand for on('swap')). */
  onSwap(listener: (snapshot: Snapshot) => void): () => void {
    return this.on('swap', (event) => listener(event.snapshot));
  }

  on<K extends keyof PolicyStoreEvents>(event: K, listener: Listener<K>): () => void {
    this.#listeners[event].add(listener);
    return () => this.#listeners[event].delete(listener);
  }

  status(): PolicyStatus {
    const snapshot = this.#holder.snapshot;
    const cp = this.#controlPlane;
    return {
      generation: snapshot.generation,
      hash: this.#inputsHash,
      policyHash: snapshot.hash,
      loadedAt: new Date(this.#loadedAt).toISOString(),
      files: [...new Set(snapshot.files)],
      plugins: this.#plugins.map(({ name, version, file, hash }) => ({ name, version, file, hash })),
      pluginDirs: this.#pluginDirs.map(displayPath),
      inFlight: this.#holder.refs,
      draining: [...this.#draining].map((h) => ({ generation: h.snapshot.generation, inFlight: h.refs })),
      reloads: { ...this.#counts },
      lastReload: this.#lastReload,
      lastError: this.#lastError,
      watching: this.#watcher && !this.#closed ? this.#watcher.paths.map(displayPath) : false,
      controlPlane: cp ? { ...cp.status(), tableInUse: this.#tableInUse?.hash, tableInUseVersion: this.#tableInUse?.version } : undefined,
    };
  }

  /** Watches the policy directory and the plugin directories; reloads on change. */
  async watch(): Promise<void> {
    if (this.#closed) return;
    this.#watcher ??= new PolicyWatcher({
      debounceMs: this.#options.debounceMs,
      usePolling: this.#options.usePolling,
      log: this.#log,
      onChange: (paths) => {
        const shown = paths.slice(0, 3).map(displayPath).join(', ');
        void this.reload(`changed: ${shown}${paths.length > 3 ? ` and ${paths.length - 3} more` : ''}`);
      },
    });
    await this.#watcher.watch(this.#watchPaths());
  }

  /**
   * Stops watching and polling, lets a running reload finish, and retires
   * the live snapshot: its strategies are disposed once every request has
   * released it. Call after the server stopped taking requests.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#retryTimer);
    this.#controlPlane?.stop();
    await this.#watcher?.close();
    await this.#tail;
    if (this.#ownsLoader) this.#loader.clearCacheDir();
    this.#retire(this.#holder);
  }

  // ---------------------------------------------------------------------------

  async #reloadNow(reason: string): Promise<ReloadOutcome> {
    const started = performance.now();
    if (this.#closed) return this.#finish(reason, started, 'unchanged', []);
    const current: Snapshot | undefined = this.#holder?.snapshot;
    const cp = this.#controlPlane;
    const newest = cp?.table();

    let inputs: PolicyInputs;
    try {
      inputs = await readPolicyInputs(this.dir, { loader: this.#loader, table: newest });
    } catch (error) {
      return this.#finish(reason, started, 'error', [{ file: displayPath(this.dir), line: 1, col: 1, message: `could not read the policy: ${(error as Error).message}` }]);
    }
    if (inputs.unsettled.length) {
      if (++this.#deferrals < MAX_DEFERRALS) {
        this.#retryLater(reason);
        return this.#finish(reason, started, 'deferred', []);
      }
      this.#deferrals = 0;
      return this.#finish(reason, started, 'error', inputs.unsettled.map((file) => ({ file, line: 1, col: 1, message: 'kept changing while being read; not applied' })));
    }
    this.#deferrals = 0;
    if (current && (inputs.hash === this.#inputsHash || inputs.hash === this.#lastFailedHash)) {
      return this.#finish(reason, started, 'unchanged', []);
    }

    let built = buildSnapshot(inputs, this.#compileOptions(current));
    let table = newest;
    let tableProblems: readonly PolicyProblem[] = [];
    let rejectedHash: string | undefined;
    // The newest table doesn't fit the local policy: try the last one that did.
    const fallback = this.#tableInUse ?? cp?.savedTable();
    if (!built.snapshot && newest && fallback && fallback.hash !== newest.hash) {
      const withNewest = built.problems;
      const retry = await readPolicyInputs(this.dir, { loader: this.#loader, table: fallback });
      if (current && retry.hash === this.#inputsHash) {
        // Only the table changed, and the policy can't be built with it.
        cp!.rejected(newest, withNewest);
        this.#lastFailedHash = inputs.hash;
        return this.#finish(reason, started, 'error', withNewest);
      }
      const second = retry.unsettled.length ? undefined : buildSnapshot(retry, this.#compileOptions(current));
      if (second?.snapshot) {
        cp!.rejected(newest, withNewest);
        rejectedHash = inputs.hash;
        tableProblems = withNewest;
        built = second;
        inputs = retry;
        table = fallback;
      } else if (second) {
        built = { ...second, problems: dedupe([...second.problems, ...withNewest]) };
      }
    }
    if (!built.snapshot) {
      this.#lastFailedHash = inputs.hash;
      return this.#finish(reason, started, 'error', built.problems);
    }

    this.#swap(built.snapshot, inputs, table, reason, performance.now() - started);
    // Built with the older table: the same inputs again are nothing new.
    this.#lastFailedHash = rejectedHash;
    if (table) cp?.accepted(table);
    return this.#finish(reason, started, 'ok', tableProblems);
  }

  #compileOptions(previous: Snapshot | undefined): Omit<CompileOptions, 'registry'> {
    return {
      generation: (previous?.generation ?? 0) + 1,
      seed: this.#options.seed,
      now: this.#options.now,
      log: this.#log,
      previous,
    };
  }

  #swap(snapshot: Snapshot, inputs: PolicyInputs, table: RoutingTable | undefined, reason: string, durationMs: number): void {
    const old: Holder | undefined = this.#holder;
    this.#holder = new Holder(snapshot, this.#onDrained);
    this.#inputsHash = inputs.hash;
    this.#lastFailedHash = undefined;
    this.#tableInUse = table;
    this.#plugins = inputs.plugins.plugins;
    this.#pluginDirs = inputs.pluginDirs;
    this.#loadedAt = Date.now();
    this.#emit('swap', { snapshot, previous: old?.snapshot, reason, durationMs });
    if (old) this.#retire(old);
    if (this.#watcher) {
      this.#watcher.watch(this.#watchPaths()).catch((error) => this.#log?.warn('policy watcher: could not watch the new plugin directories', { error: (error as Error).message }));
    }
  }

  #retire(holder: Holder): void {
    if (holder.retired) return;
    holder.retired = true;
    if (holder.refs === 0) {
      this.#dispose(holder, false);
      return;
    }
    this.#draining.add(holder);
    holder.drainTimer = setTimeout(() => {
      this.#log?.warn(`policy generation ${holder.snapshot.generation}: ${holder.refs} request(s) still hold it after the drain timeout; disposing its strategies anyway`);
      this.#dispose(holder, true);
    }, this.#options.drainTimeoutMs ?? 15 * 60_000);
    holder.drainTimer.unref();
  }

  #dispose(holder: Holder, forced: boolean): void {
    if (holder.disposed) return;
    holder.disposed = true;
    clearTimeout(holder.drainTimer);
    this.#draining.delete(holder);
    const instances = strategyInstances(holder.snapshot);
    for (const [i, instance] of instances.entries()) {
      try {
        instance.dispose?.();
      } catch (error) {
        this.#log?.warn(`strategy dispose() threw`, { generation: holder.snapshot.generation, index: i, error: (error as Error)?.message ?? String(error) });
      }
    }
    this.#emit('disposed', { generation: holder.snapshot.generation, instances: instances.length, forced });
  }

  #finish(reason: string, started: number, result: ReloadResult, problems: readonly PolicyProblem[]): ReloadOutcome {
    const snapshot: Snapshot | undefined = this.#holder?.snapshot;
    const outcome: ReloadOutcome = {
      result,
      reason,
      generation: snapshot?.generation ?? 0,
      hash: this.#inputsHash,
      durationMs: performance.now() - started,
      at: new Date().toISOString(),
      problems,
      errors: problems.map(formatProblem),
    };
    this.#counts[result]++;
    this.#lastReload = outcome;
    if (result === 'error') {
      this.#lastError = outcome;
      this.#log?.warn(`policy reload failed (${reason}): keeping generation ${outcome.generation}`, { errors: outcome.errors });
    } else if (result === 'ok') {
      this.#log?.info(`policy generation ${outcome.generation} live (${reason})`, { hash: outcome.hash, durationMs: Math.round(outcome.durationMs * 10) / 10, ...(problems.length ? { tableRejected: outcome.errors } : {}) });
    }
    this.#emit('reload', outcome);
    return outcome;
  }

  #retryLater(reason: string): void {
    clearTimeout(this.#retryTimer);
    this.#retryTimer = setTimeout(() => void this.reload(reason.endsWith('(re-read)') ? reason : `${reason} (re-read)`), this.#options.debounceMs ?? 100);
    this.#retryTimer.unref();
  }

  #watchPaths(): string[] {
    return [this.dir, ...this.#pluginDirs.filter((dir) => existsSync(dir))];
  }

  #emit<K extends keyof PolicyStoreEvents>(event: K, payload: PolicyStoreEvents[K]): void {
    for (const listener of this.#listeners[event]) {
      try {
        listener(payload);
      } catch (error) {
        this.#log?.warn(`policy store: a ${event} listener threw`, { error: (error as Error)?.message ?? String(error) });
      }
    }
  }
}

function dedupe(problems: readonly PolicyProblem[]): PolicyProblem[] {
  const seen = new Set<string>();
  return problems.filter((p) => {
    const key = formatProblem(p);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
