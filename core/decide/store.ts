// The router's one live reference to policy, and its reloads. A reload reads
// the policy directory, the plugins and the control plane's table completely
// off the hot path, compiles it and builds a whole new generation from it, then
// swaps one reference; any problem keeps the current generation
// (last-known-good). Each reload answers with what it found on disk now:
// live, unchanged or refused (with every problem). Holding generations for
// requests is generation-leases.ts; the control-plane table fallback is
// core/policy/table-fallback.ts; watching is core/policy/watch.ts.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { KvIndexView, Logger } from '../../sdk/index.ts';
import { displayPath, formatProblem, PolicyError, type PolicyProblem } from '../diagnostics/problem.ts';
import type { CageStatus } from '../plugins/cage/cage.ts';
import { loaderFor, type LoadedPlugin, type PluginLoader, type StrategySource } from '../plugins/loader.ts';
import { ControlPlaneSource, type ControlPlaneOptions, type ControlPlaneStatus } from '../policy/control-plane.ts';
import { readPolicyInputs, type PolicyInputs } from '../policy/inputs.ts';
import type { RoutingTable } from '../policy/routing-table.ts';
import { buildWithTableFallback } from '../policy/table-fallback.ts';
import { isPolicyChange, PolicyWatcher } from '../policy/watch.ts';
import { SnapshotLeases, type DisposedEvent, type SnapshotLease } from './generation-leases.ts';
import type { Generation } from './generation.ts';
import { buildSnapshot, type BuildOptions } from './load.ts';

export type { DisposedEvent, SnapshotLease } from './generation-leases.ts';

/**
 * The strategies come as a `loader` (keeps compiled plugins across reloads;
 * one per store unless shared on purpose) or as the `builtins` alone, and
 * the store makes, and closes, a loader of its own.
 */
export type PolicyStoreOptions = StrategySource & {
  /** The policy directory. */
  readonly dir: string;
  /** The routing table from a control plane (see control-plane.ts), joined to the local files. */
  readonly controlPlane?: ControlPlaneOptions | ControlPlaneSource;
  /** Seeds every strategy's random source. */
  readonly seed?: number | string;
  /** The strategies' clock. */
  readonly now?: () => number;
  /** The engines' KV cache contents (fed by KV events), for strategies' ctx.kvIndex. */
  readonly kvIndex?: KvIndexView;
  /** The engine profiles an emulate:// replica may name (see CompileOptions). */
  readonly emulatedProfiles?: readonly string[];
  readonly log?: Logger;
  /** A replaced snapshot still held after this long is disposed anyway, with a warning. Default 15 min. */
  readonly drainTimeoutMs?: number;
  /** Watcher quiet time, and the wait before re-reading a file caught mid-save, ms. Default 100. */
  readonly debounceMs?: number;
  /** Poll the file system instead of native events (network file systems). */
  readonly usePolling?: boolean;
};

export type ReloadResult =
  /** What is on disk is now live (a new snapshot). */
  | 'live'
  /** What is on disk is what is live already. */
  | 'unchanged'
  /** What is on disk has problems: the current snapshot stays (last-known-good). */
  | 'refused';

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
  /** Why it was refused; for 'live', why the newest control-plane table was not used (empty otherwise). */
  readonly problems: readonly PolicyProblem[];
  /** `problems` as FILE:LINE:COL: message lines. */
  readonly errors: readonly string[];
};

export type PolicyStatus = {
  readonly generation: number;
  /** Over policy files, plugins and routing table. */
  readonly hash: string;
  /** Over the policy documents alone (Generation.hash). */
  readonly policyHash: string;
  /** ISO time the live snapshot was swapped in. */
  readonly loadedAt: string;
  readonly files: readonly string[];
  /** `isolation`: the plugin's cage (state, quarantine, counts); absent when loaded inline. */
  readonly plugins: readonly {
    readonly name: string;
    readonly version: string;
    readonly file: string;
    readonly hash: string;
    readonly isolation?: CageStatus;
  }[];
  readonly pluginDirs: readonly string[];
  /** Requests holding the live snapshot. */
  readonly inFlight: number;
  /** Replaced snapshots still held by requests, waiting to be disposed. */
  readonly draining: readonly { readonly generation: number; readonly inFlight: number }[];
  readonly reloads: Readonly<Record<ReloadResult, number>>;
  /** What the last reload found on disk: whether it is what is live, and if not, why not. */
  readonly disk: { readonly matchesLive: boolean; readonly checkedAt: string; readonly errors: readonly string[] };
  readonly lastReload?: ReloadOutcome;
  /** The refused reload, while the files on disk are still the refused ones; gone once they are good again. */
  readonly lastError?: ReloadOutcome;
  /** Directories being watched, or false. */
  readonly watching: readonly string[] | false;
  readonly controlPlane?: ControlPlaneStatus & { readonly tableInUse?: string; readonly tableInUseVersion?: string };
};

export interface SwapEvent {
  readonly snapshot: Generation;
  readonly previous?: Generation;
  readonly reason: string;
  readonly durationMs: number;
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

export class PolicyStore {
  readonly dir: string;
  readonly #loader: PluginLoader;
  readonly #ownsLoader: boolean;
  readonly #controlPlane?: ControlPlaneSource;
  readonly #options: PolicyStoreOptions;
  readonly #log?: Logger;
  readonly #leases: SnapshotLeases;
  #inputsHash = '';
  /** The last refused inputs and why: the same inputs again are refused at once, for the same reasons. */
  #refused?: { readonly hash: string; readonly problems: readonly PolicyProblem[] };
  #tableInUse?: RoutingTable;
  #plugins: readonly LoadedPlugin[] = [];
  #pluginDirs: readonly string[] = [];
  #loadedAt = 0;
  #lastReload?: ReloadOutcome;
  readonly #counts: Record<ReloadResult, number> = { live: 0, unchanged: 0, refused: 0 };
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
    const { loader, owned } = loaderFor(options, { log: options.log });
    this.#loader = loader;
    this.#ownsLoader = owned;
    this.#leases = new SnapshotLeases({ drainTimeoutMs: options.drainTimeoutMs, log: options.log, onDisposed: (event) => this.#emit('disposed', event) });
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
    const first = await this.reload('initial load');
    if (first.result !== 'live') {
      cp?.stop();
      if (this.#ownsLoader) {
        this.#loader.clearCacheDir();
        void this.#loader.close();
      }
      const problems = [...first.problems];
      if (cp && !cp.table())
        problems.unshift({ file: cp.url, line: 1, col: 1, message: `no routing table yet: ${cp.status().errors.join('; ') || 'none served'}` });
      throw new PolicyError(problems);
    }
  }

  /** The live snapshot. For a request, prefer acquire(): it keeps the snapshot's strategies alive until release. */
  current(): Generation {
    return this.#leases.current!;
  }

  /** Holds the live snapshot for one request. Cheap: a count and one small object. */
  acquire(): SnapshotLease {
    return this.#leases.acquire();
  }

  /** Plugins of the live snapshot. */
  get plugins(): readonly LoadedPlugin[] {
    return this.#plugins;
  }

  /**
   * Reads what is on disk now, validates it and (when it differs from what
   * is live) swaps: live, unchanged or refused. Reloads run one at a time;
   * calls made while one runs share the next run.
   */
  reload(reason = 'manual'): Promise<ReloadOutcome> {
    if (this.#queued) return this.#queued;
    const run = this.#tail.then(() => {
      this.#queued = undefined;
      return this.#reloadSettled(reason);
    });
    this.#queued = run;
    this.#tail = run.catch(() => {});
    return run;
  }

  /** Each new live snapshot (shorthand for on('swap')). */
  onSwap(listener: (snapshot: Generation) => void): () => void {
    return this.on('swap', (event) => listener(event.snapshot));
  }

  on<K extends keyof PolicyStoreEvents>(event: K, listener: Listener<K>): () => void {
    this.#listeners[event].add(listener);
    return () => this.#listeners[event].delete(listener);
  }

  status(): PolicyStatus {
    const snapshot = this.current();
    const cp = this.#controlPlane;
    const last = this.#lastReload;
    const refused = last?.result === 'refused' ? last : undefined;
    return {
      generation: snapshot.generation,
      hash: this.#inputsHash,
      policyHash: snapshot.hash,
      loadedAt: new Date(this.#loadedAt).toISOString(),
      files: [...new Set(snapshot.files)],
      plugins: this.#plugins.map(({ name, version, file, hash, cage }) => ({ name, version, file, hash, isolation: cage?.status() })),
      pluginDirs: this.#pluginDirs.map(displayPath),
      inFlight: this.#leases.inFlight,
      draining: this.#leases.draining(),
      reloads: { ...this.#counts },
      disk: { matchesLive: !refused, checkedAt: last?.at ?? new Date(this.#loadedAt).toISOString(), errors: refused?.errors ?? [] },
      lastReload: last,
      lastError: refused,
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
      // Editors' temp files, swap files and backups are never named as changes.
      accept: (path) => isPolicyChange(path, this.dir, this.#pluginDirs),
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
    this.#controlPlane?.stop();
    await this.#watcher?.close();
    await this.#tail;
    this.#leases.retireAll();
    if (this.#ownsLoader) {
      this.#loader.clearCacheDir();
      await this.#loader.close();
    }
  }

  // ---------------------------------------------------------------------------

  /** One reload, re-reading (briefly) while a file is caught mid-save, so the answer is about settled files. */
  async #reloadSettled(reason: string): Promise<ReloadOutcome> {
    const started = performance.now();
    if (this.#closed) return this.#finish(reason, started, 'unchanged', []);
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.#reloadNow(reason, started, attempt >= MAX_DEFERRALS);
      if (outcome !== 'deferred') return outcome;
      await new Promise((done) => setTimeout(done, this.#options.debounceMs ?? 100));
      if (this.#closed) return this.#finish(reason, started, 'unchanged', []);
    }
  }

  async #reloadNow(reason: string, started: number, lastTry: boolean): Promise<ReloadOutcome | 'deferred'> {
    const current = this.#leases.current;
    const cp = this.#controlPlane;
    const newest = cp?.table();
    const read = async (table: RoutingTable | undefined) => readPolicyInputs(this.dir, { loader: this.#loader, table });

    let inputs: PolicyInputs;
    try {
      inputs = await read(newest);
    } catch (error) {
      return this.#finish(reason, started, 'refused', [
        { file: displayPath(this.dir), line: 1, col: 1, message: `could not read the policy: ${(error as Error).message}` },
      ]);
    }
    if (inputs.unsettled.length) {
      if (!lastTry) return 'deferred';
      return this.#finish(
        reason,
        started,
        'refused',
        inputs.unsettled.map((file) => ({ file, line: 1, col: 1, message: 'kept changing while being read; not applied' })),
      );
    }
    if (current && inputs.hash === this.#inputsHash) return this.#finish(reason, started, 'unchanged', []);
    if (inputs.hash === this.#refused?.hash) return this.#finish(reason, started, 'refused', this.#refused.problems, { repeat: true });

    const result = await buildWithTableFallback({
      inputs,
      newest,
      fallback: this.#tableInUse ?? cp?.savedTable(),
      controlPlane: cp,
      liveHash: current ? this.#inputsHash : '',
      read,
      build: (candidate) => buildSnapshot(candidate, this.#buildOptions(current)),
    });
    if (!result.snapshot) {
      this.#refused = { hash: result.failedHash, problems: result.problems };
      return this.#finish(reason, started, 'refused', result.problems);
    }
    this.#swap(result.snapshot, result.inputs, result.table, reason, performance.now() - started);
    this.#refused = result.rejectedHash ? { hash: result.rejectedHash, problems: result.tableProblems } : undefined;
    if (result.table) cp?.accepted(result.table);
    return this.#finish(reason, started, 'live', result.tableProblems);
  }

  #buildOptions(previous: Generation | undefined): BuildOptions {
    return {
      generation: (previous?.generation ?? 0) + 1,
      seed: this.#options.seed,
      now: this.#options.now,
      log: this.#log,
      previous,
      kvIndex: this.#options.kvIndex,
      emulatedProfiles: this.#options.emulatedProfiles,
    };
  }

  #swap(snapshot: Generation, inputs: PolicyInputs, table: RoutingTable | undefined, reason: string, durationMs: number): void {
    const previous = this.#leases.current;
    this.#inputsHash = inputs.hash;
    this.#tableInUse = table;
    this.#plugins = inputs.plugins.plugins;
    this.#pluginDirs = inputs.pluginDirs;
    this.#loadedAt = Date.now();
    const retirePrevious = this.#leases.swap(snapshot);
    // Listeners run before the old snapshot is retired: they may still read it.
    this.#emit('swap', { snapshot, previous, reason, durationMs });
    retirePrevious();
    if (this.#watcher) {
      this.#watcher
        .watch(this.#watchPaths())
        .catch((error) => this.#log?.warn('policy watcher: could not watch the new plugin directories', { error: (error as Error).message }));
    }
  }

  #finish(reason: string, started: number, result: ReloadResult, problems: readonly PolicyProblem[], options: { repeat?: boolean } = {}): ReloadOutcome {
    const snapshot = this.#leases.current;
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
    if (result === 'refused' && !options.repeat) {
      this.#log?.warn(`policy reload refused (${reason}): keeping generation ${outcome.generation}`, { errors: outcome.errors });
    } else if (result === 'live') {
      this.#log?.info(`policy generation ${outcome.generation} live (${reason})`, {
        hash: outcome.hash,
        durationMs: Math.round(outcome.durationMs * 10) / 10,
        ...(problems.length ? { tableRejected: outcome.errors } : {}),
      });
    }
    this.#emit('reload', outcome);
    return outcome;
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
