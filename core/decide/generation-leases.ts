// Holding and swapping the live generation. A request acquires the generation at
// arrival and releases it when its last byte is out: a count per generation.
// A replaced generation's strategy instances are disposed exactly once, when
// the last request that started on it has released it (or, for a request
// that never does, after a drain timeout).
import type { Logger } from '../../sdk/index.ts';
import { strategyInstances, type Generation } from './generation.ts';

export interface SnapshotLease {
  readonly snapshot: Generation;
  /** Ends the request's hold on the snapshot; safe to call more than once. */
  release(): void;
}

export interface DisposedEvent {
  readonly generation: number;
  readonly instances: number;
  /** True when the drain timeout ran out before every request released it. */
  readonly forced: boolean;
}

/** One snapshot and the requests holding it. */
class Holder {
  refs = 0;
  retired = false;
  disposed = false;
  drainTimer?: NodeJS.Timeout;
  constructor(
    readonly snapshot: Generation,
    readonly onDrained: (holder: Holder) => void,
  ) {}
}

class Lease implements SnapshotLease {
  readonly snapshot: Generation;
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

export interface SnapshotLeasesOptions {
  /** A replaced snapshot still held after this long is disposed anyway, with a warning. Default 15 min. */
  readonly drainTimeoutMs?: number;
  readonly log?: Logger;
  readonly onDisposed?: (event: DisposedEvent) => void;
}

export class SnapshotLeases {
  #holder?: Holder;
  readonly #draining = new Set<Holder>();
  readonly #options: SnapshotLeasesOptions;
  readonly #onDrained = (holder: Holder) => this.#dispose(holder, false);

  constructor(options: SnapshotLeasesOptions = {}) {
    this.#options = options;
  }

  /** The live snapshot, or undefined before the first swap. */
  get current(): Generation | undefined {
    return this.#holder?.snapshot;
  }

  /** Holds the live snapshot for one request. Cheap: a count and one small object. Only after the first swap. */
  acquire(): SnapshotLease {
    const holder = this.#holder!;
    holder.refs++;
    return new Lease(holder);
  }

  /**
   * Makes `snapshot` live. Returns the function that retires the one it
   * replaced (disposed once released): call it once swap listeners are done.
   */
  swap(snapshot: Generation): () => void {
    const old = this.#holder;
    this.#holder = new Holder(snapshot, this.#onDrained);
    return () => {
      if (old) this.#retire(old);
    };
  }

  /** Requests holding the live snapshot. */
  get inFlight(): number {
    return this.#holder?.refs ?? 0;
  }

  /** Replaced snapshots still held by requests. */
  draining(): { generation: number; inFlight: number }[] {
    return [...this.#draining].map((h) => ({ generation: h.snapshot.generation, inFlight: h.refs }));
  }

  /** Retires the live snapshot too (shutdown): disposed once every request has released it. */
  retireAll(): void {
    if (this.#holder) this.#retire(this.#holder);
  }

  #retire(holder: Holder): void {
    if (holder.retired) return;
    holder.retired = true;
    if (holder.refs === 0) {
      this.#dispose(holder, false);
      return;
    }
    this.#draining.add(holder);
    holder.drainTimer = setTimeout(
      () => {
        this.#options.log?.warn(
          `policy generation ${holder.snapshot.generation}: ${holder.refs} request(s) still hold it after the drain timeout; disposing its strategies anyway`,
        );
        this.#dispose(holder, true);
      },
      this.#options.drainTimeoutMs ?? 15 * 60_000,
    );
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
        this.#options.log?.warn(`strategy dispose() threw`, {
          generation: holder.snapshot.generation,
          index: i,
          error: (error as Error)?.message ?? String(error),
        });
      }
    }
    this.#options.onDisposed?.({ generation: holder.snapshot.generation, instances: instances.length, forced });
  }
}
