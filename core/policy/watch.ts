// Watches the policy directory and the plugin directories (chokidar) and
// reports, debounced, that a policy or plugin file may have changed. Paths
// that can't be one (editors' temp files such as sed's `sedLmAWW0`, vim's
// `.swp` and `4913`, `~` backups) are never reported, so they are never named
// as changes. It does not decide whether anything did change: the store
// hashes what it reads, so a save that changes nothing, or the
// `..data`/`..2026_…` churn of a Kubernetes ConfigMap swap, ends in a cheap
// "unchanged".
//
// Measured with chokidar 4 on Linux: a temp-file-then-rename save gives one
// `change` of the file; a ConfigMap `..data` symlink swap gives `change` of
// each linked file plus addDir/unlinkDir of the `..<timestamp>` folders.
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { watch, type FSWatcher } from 'chokidar';
import type { Logger } from '../../sdk/index.ts';

export interface PolicyWatcherOptions {
  /** Called once the directories have been quiet for `debounceMs`, with the paths that moved. */
  readonly onChange: (paths: string[]) => void;
  /** Quiet time before reporting, ms. Default 100: a burst of writes (a git checkout, a ConfigMap swap) is one reload. */
  readonly debounceMs?: number;
  /** Longest a steady stream of events can hold a report back, ms. Default 10 × debounceMs. */
  readonly maxWaitMs?: number;
  /** Poll instead of native events (network file systems). */
  readonly usePolling?: boolean;
  readonly log?: Logger;
  /** Which paths count; default all. */
  readonly accept?: (path: string) => boolean;
}

const POLICY_FILE = /^[^.~#][^/]*\.(ya?ml|json)$/i;
const PLUGIN_SOURCE = /^[^.~#][^/]*\.(m?ts|m?js|cjs|json)$/i;

/**
 * Whether a path the watcher saw can be a change of policy: a policy file of
 * the policy directory, a source file of a plugin directory, or one of those
 * directories itself (a ConfigMap swap, a replaced watcher). Temp and backup
 * files never match.
 */
export function isPolicyChange(path: string, policyDir: string, pluginDirs: readonly string[]): boolean {
  const full = resolve(path);
  if (full === resolve(policyDir) || pluginDirs.some((d) => resolve(d) === full)) return true;
  const name = basename(full);
  const parent = dirname(full);
  if (parent === resolve(policyDir) && POLICY_FILE.test(name)) return true;
  return pluginDirs.some((d) => resolve(d) === parent) && PLUGIN_SOURCE.test(name);
}

export class PolicyWatcher {
  readonly #options: PolicyWatcherOptions;
  readonly #debounceMs: number;
  readonly #maxWaitMs: number;
  #watcher?: FSWatcher;
  #paths: string[] = [];
  #pending: string[] = [];
  #timer?: NodeJS.Timeout;
  #firstEventAt = 0;
  #closed = false;
  #changing: Promise<void> = Promise.resolve();

  constructor(options: PolicyWatcherOptions) {
    this.#options = options;
    this.#debounceMs = options.debounceMs ?? 100;
    this.#maxWaitMs = options.maxWaitMs ?? this.#debounceMs * 10;
  }

  /** The directories being watched. */
  get paths(): readonly string[] {
    return this.#paths;
  }

  /**
   * Watches exactly `paths` (directories); resolves once chokidar is ready.
   * A different set replaces the watcher (chokidar signals ready only once
   * per watcher), then reports a change so nothing written in between is missed.
   */
  watch(paths: readonly string[]): Promise<void> {
    // One at a time: replacing a watcher another call still waits on would leave that call hanging.
    const next = this.#changing.then(() => this.#replace(paths));
    this.#changing = next.catch(() => {});
    return next;
  }

  async #replace(paths: readonly string[]): Promise<void> {
    if (this.#closed) return;
    const wanted = [...new Set(paths)].sort();
    if (this.#watcher && wanted.join('\0') === this.#paths.join('\0')) return;
    const replacing = this.#watcher !== undefined;
    await this.#watcher?.close();
    this.#paths = wanted;
    const watcher = watch(wanted, {
      ignoreInitial: true,
      // Plugins and policies are single files directly in their folder.
      depth: 0,
      usePolling: this.#options.usePolling ?? false,
      interval: 100,
    });
    this.#watcher = watcher;
    watcher.on('all', (_event, path) => this.#saw(String(path)));
    // chokidar drops a second `change` of a file within 50 ms of the first;
    // the raw fs.watch events are never dropped, so the debounce sees every write.
    watcher.on('raw', (_event, path, details) => {
      const watched = (details as { watchedPath?: string } | undefined)?.watchedPath;
      const name = String(path ?? '');
      // A folder's watcher names the entry; a file's own watcher names the file itself.
      this.#saw(!watched ? name : !name || isAbsolute(name) || basename(watched) === name ? watched : join(watched, name));
    });
    watcher.on('error', (error) => this.#options.log?.warn('policy watcher error', { error: (error as Error).message }));
    await new Promise<void>((resolve) => watcher.once('ready', () => resolve()));
    if (this.#closed) await watcher.close();
    else if (replacing) this.#saw(wanted[0] ?? '');
  }

  /** Stops watching; a pending report is dropped. No handle is left behind. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#pending = [];
    await this.#changing;
    await this.#watcher?.close();
    this.#watcher = undefined;
  }

  #saw(path: string): void {
    if (this.#closed || (this.#options.accept && !this.#options.accept(path))) return;
    const now = Date.now();
    if (this.#pending.length === 0) this.#firstEventAt = now;
    if (!this.#pending.includes(path)) this.#pending.push(path);
    clearTimeout(this.#timer);
    const wait = Math.max(0, Math.min(this.#debounceMs, this.#firstEventAt + this.#maxWaitMs - now));
    this.#timer = setTimeout(() => this.#fire(), wait);
  }

  #fire(): void {
    this.#timer = undefined;
    const paths = this.#pending;
    this.#pending = [];
    if (paths.length === 0 || this.#closed) return;
    try {
      this.#options.onChange(paths);
    } catch (error) {
      this.#options.log?.warn('policy watcher: change handler threw', { error: (error as Error).message });
    }
  }
}
