// A control plane as the source of the routing table (docs/hot-reload.md,
// "The control plane"): polled every TTL with If-None-Match, so an unchanged table
// costs a 304. While the control plane is unreachable or serves something
// invalid, the last good table stays in use and the status says so; the last
// table a snapshot was built from is saved to disk, so a router restarted
// during an outage still serves it. Load signals don't come from here: they
// keep flowing from the replicas whatever the control plane does.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Logger } from '../../sdk/index.ts';
import { parseRoutingTable, type RoutingTable } from './routing-table.ts';
import { formatProblem, type PolicyProblem } from '../diagnostics/problem.ts';

export interface ControlPlaneOptions {
  /** Serves a `kind: routing-table` document (YAML or JSON). */
  readonly url: string;
  /** How often to ask, ms. Default 30 s: the table may be slow, load signals may not. */
  readonly ttlMs?: number;
  /** One request's limit, ms. Default 5 s. */
  readonly timeoutMs?: number;
  /** Where the last good table is kept across restarts. Default: a file under the OS temp dir named by the URL's hash; point it at a persistent volume in production. */
  readonly cacheFile?: string;
  readonly log?: Logger;
  /** Extra request headers (an auth token, say). */
  readonly headers?: Record<string, string>;
}

export type ControlPlaneState =
  /** Not asked yet. */
  | 'starting'
  /** The last request answered with a valid table (or 304). */
  | 'ok'
  /** The last request failed (connection, timeout, HTTP error): the last good table stays. */
  | 'unreachable'
  /** The last answer was not a valid routing table: the last good table stays. */
  | 'invalid'
  /** The table is valid alone but the policy can't be built with it (a tenant's model is gone, say): the last good table stays. */
  | 'rejected';

export type ControlPlaneStatus = {
  readonly url: string;
  readonly state: ControlPlaneState;
  /** Where the newest usable table came from. */
  readonly tableFrom: 'network' | 'disk' | 'none';
  readonly tableHash?: string;
  readonly tableVersion?: string;
  readonly etag?: string;
  /** ISO times. */
  readonly lastAttemptAt?: string;
  readonly lastSuccessAt?: string;
  readonly lastChangeAt?: string;
  readonly consecutiveFailures: number;
  /** Why the last request failed, or the table's problems as FILE:LINE:COL lines. */
  readonly errors: readonly string[];
  readonly cacheFile: string;
};

interface SavedTable {
  readonly url: string;
  readonly etag?: string;
  readonly savedAt: string;
  readonly text: string;
}

export type PollResult = 'changed' | 'unchanged' | 'failed';

export class ControlPlaneSource {
  readonly url: string;
  readonly cacheFile: string;
  readonly #ttlMs: number;
  readonly #timeoutMs: number;
  readonly #headers: Record<string, string>;
  readonly #log?: Logger;
  #newest?: RoutingTable;
  #saved?: RoutingTable;
  #tableFrom: ControlPlaneStatus['tableFrom'] = 'none';
  #state: ControlPlaneState = 'starting';
  #errors: readonly string[] = [];
  #failures = 0;
  #rejected?: { readonly hash: string; readonly errors: readonly string[] };
  #lastAttemptAt?: number;
  #lastSuccessAt?: number;
  #lastChangeAt?: number;
  #timer?: NodeJS.Timeout;
  #stopped = false;
  readonly #abort = new AbortController();
  readonly #changeListeners = new Set<(table: RoutingTable) => void>();
  readonly #statusListeners = new Set<(status: ControlPlaneStatus) => void>();

  constructor(options: ControlPlaneOptions) {
    this.url = options.url;
    this.#ttlMs = options.ttlMs ?? 30_000;
    this.#timeoutMs = options.timeoutMs ?? 5_000;
    this.#headers = options.headers ?? {};
    this.#log = options.log;
    this.cacheFile =
      options.cacheFile ?? join(tmpdir(), `switchyard-routing-table-${createHash('sha256').update(options.url).digest('hex').slice(0, 12)}.json`);
  }

  /** Reads the saved table, asks once, then polls every TTL until stop(). */
  async start(): Promise<void> {
    this.#saved = this.#readSaved();
    if (this.#saved) {
      this.#newest = this.#saved;
      this.#tableFrom = 'disk';
    }
    await this.poll();
    this.#schedule();
  }

  /** The newest valid table: what the next snapshot is built with. */
  table(): RoutingTable | undefined {
    return this.#newest;
  }

  /** The table saved by the last successful build (this run or an earlier one). */
  savedTable(): RoutingTable | undefined {
    return this.#saved;
  }

  /** Asks the control plane now. */
  async poll(): Promise<PollResult> {
    if (this.#stopped) return 'unchanged';
    this.#lastAttemptAt = Date.now();
    let response: Response;
    let text: string;
    try {
      const headers: Record<string, string> = { accept: 'application/yaml, application/json;q=0.9, */*;q=0.5', ...this.#headers };
      if (this.#newest?.etag) headers['if-none-match'] = this.#newest.etag;
      response = await fetch(this.url, { headers, signal: AbortSignal.any([this.#abort.signal, AbortSignal.timeout(this.#timeoutMs)]) });
      if (response.status === 304) {
        await response.body?.cancel();
        if (this.#newest) this.#tableFrom = 'network';
        this.#succeeded();
        return 'unchanged';
      }
      text = await response.text();
      if (!response.ok) throw new Error(`HTTP ${response.status} ${response.statusText}`.trim());
    } catch (error) {
      if (this.#stopped) return 'unchanged';
      this.#failures++;
      const reason = error instanceof Error && error.name === 'TimeoutError' ? `no answer within ${this.#timeoutMs} ms` : describeFetchError(error);
      this.#set('unreachable', [
        `${this.url}: unreachable: ${reason}; keeping the ${this.#newest ? `last good table (${this.#tableFrom})` : 'local policy only (no table yet)'}`,
      ]);
      return 'failed';
    }
    const etag = response.headers.get('etag') ?? undefined;
    const parsed = parseRoutingTable(this.url, text, etag);
    if (!parsed.table) {
      this.#failures++;
      this.#set('invalid', parsed.problems.map(formatProblem));
      return 'failed';
    }
    const changed = parsed.table.hash !== this.#newest?.hash;
    this.#newest = parsed.table;
    this.#tableFrom = 'network';
    this.#succeeded();
    if (!changed) return 'unchanged';
    this.#lastChangeAt = Date.now();
    for (const listener of this.#changeListeners) listener(parsed.table);
    return 'changed';
  }

  /** A snapshot was built with `table`: it becomes the saved copy a restart falls back on. */
  accepted(table: RoutingTable): void {
    if (this.#rejected?.hash === table.hash) {
      this.#rejected = undefined;
      if (this.#state === 'rejected') this.#set('ok', []);
    }
    if (this.#saved?.hash === table.hash && this.#saved.etag === table.etag) return;
    this.#saved = table;
    try {
      mkdirSync(dirname(this.cacheFile), { recursive: true });
      const saved: SavedTable = { url: this.url, etag: table.etag, savedAt: new Date().toISOString(), text: table.text };
      const temporary = `${this.cacheFile}.${process.pid}.tmp`;
      writeFileSync(temporary, JSON.stringify(saved));
      renameSync(temporary, this.cacheFile);
    } catch (error) {
      this.#log?.warn('control plane: could not save the routing table', { file: this.cacheFile, error: (error as Error).message });
    }
  }

  /** The policy can't be built with `table`: the last good one stays in use. */
  rejected(table: RoutingTable, problems: readonly PolicyProblem[]): void {
    this.#rejected = { hash: table.hash, errors: problems.map(formatProblem) };
    if (table.hash === this.#newest?.hash) this.#set('rejected', this.#rejected.errors);
  }

  status(): ControlPlaneStatus {
    const iso = (ms?: number) => (ms === undefined ? undefined : new Date(ms).toISOString());
    return {
      url: this.url,
      state: this.#state,
      tableFrom: this.#tableFrom,
      tableHash: this.#newest?.hash,
      tableVersion: this.#newest?.version,
      etag: this.#newest?.etag,
      lastAttemptAt: iso(this.#lastAttemptAt),
      lastSuccessAt: iso(this.#lastSuccessAt),
      lastChangeAt: iso(this.#lastChangeAt),
      consecutiveFailures: this.#failures,
      errors: this.#errors,
      cacheFile: this.cacheFile,
    };
  }

  /** Called with each new valid table. Returns an unsubscribe function. */
  onChange(listener: (table: RoutingTable) => void): () => void {
    this.#changeListeners.add(listener);
    return () => this.#changeListeners.delete(listener);
  }

  /** Called when the state changes (ok, unreachable, invalid, rejected). */
  onStatus(listener: (status: ControlPlaneStatus) => void): () => void {
    this.#statusListeners.add(listener);
    return () => this.#statusListeners.delete(listener);
  }

  /** Stops polling and aborts a request in flight. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#abort.abort();
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      void this.poll().finally(() => this.#schedule());
    }, this.#ttlMs);
    this.#timer.unref();
  }

  /** The control plane answered with a valid table: ok, unless it is the one the policy can't be built with. */
  #succeeded(): void {
    this.#failures = 0;
    this.#lastSuccessAt = Date.now();
    if (this.#rejected && this.#rejected.hash === this.#newest?.hash) this.#set('rejected', this.#rejected.errors);
    else this.#set('ok', []);
  }

  #set(state: ControlPlaneState, errors: readonly string[]): void {
    const changed = state !== this.#state || errors.join('\n') !== this.#errors.join('\n');
    this.#state = state;
    this.#errors = errors;
    if (!changed) return;
    if (state !== 'ok') this.#log?.warn(`control plane ${state}`, { url: this.url, errors });
    else this.#log?.info('control plane ok', { url: this.url, table: this.#newest?.hash });
    const status = this.status();
    for (const listener of this.#statusListeners) listener(status);
  }

  #readSaved(): RoutingTable | undefined {
    let saved: SavedTable;
    try {
      saved = JSON.parse(readFileSync(this.cacheFile, 'utf8')) as SavedTable;
    } catch {
      return undefined;
    }
    if (saved.url !== this.url || typeof saved.text !== 'string') return undefined;
    const parsed = parseRoutingTable(this.url, saved.text, saved.etag);
    if (!parsed.table) {
      this.#log?.warn('control plane: the saved routing table is not valid; ignoring it', { file: this.cacheFile });
      return undefined;
    }
    return parsed.table;
  }
}

function describeFetchError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ? `${error.message} (${cause.code})` : cause?.message ? `${error.message}: ${cause.message}` : error.message;
}
