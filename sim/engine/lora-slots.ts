// The engine's GPU slots for LoRA adapters: at most max_loras adapters are
// loaded; an adapter in use by a running request stays; a new one takes a free
// slot or evicts the least recently used idle adapter. With every slot held by
// a running request, a request for another adapter has to wait (vLLM's
// scheduler skips it and goes on down the queue).

export class LoraSlots {
  readonly maxLoras: number;
  // adapter → running requests using it; Map order is least recently used first.
  private readonly users = new Map<string, number>();
  private active = 0;

  constructor(maxLoras: number) {
    this.maxLoras = maxLoras;
  }

  /** Adapters with at least one running request: the distinct adapters of the batch. */
  get activeCount(): number {
    return this.active;
  }

  isLoaded(adapter: string): boolean {
    return this.users.has(adapter);
  }

  /** Loaded adapters, least recently used first. */
  loaded(): string[] {
    return [...this.users.keys()];
  }

  /** Loaded adapters that running requests use. */
  running(): string[] {
    const out: string[] = [];
    for (const [adapter, count] of this.users) if (count > 0) out.push(adapter);
    return out;
  }

  /** Whether a request for `adapter` could start now. */
  canAcquire(adapter: string): boolean {
    if (this.users.has(adapter) || this.users.size < this.maxLoras) return true;
    return this.idleVictim() !== undefined;
  }

  /**
   * Counts one more running request on `adapter`, loading it first when
   * needed. Returns true when it had to be loaded (the caller pays the load
   * time). Call only after `canAcquire` said yes.
   */
  acquire(adapter: string): boolean {
    const count = this.users.get(adapter);
    if (count !== undefined) {
      this.users.delete(adapter);
      this.users.set(adapter, count + 1);
      if (count === 0) this.active++;
      return false;
    }
    if (this.users.size >= this.maxLoras) {
      const victim = this.idleVictim();
      if (victim === undefined) throw new Error(`no LoRA slot free for '${adapter}'`);
      this.users.delete(victim);
    }
    this.users.set(adapter, 1);
    this.active++;
    return true;
  }

  release(adapter: string): void {
    const count = this.users.get(adapter);
    if (count === undefined || count === 0) return;
    this.users.set(adapter, count - 1);
    if (count === 1) this.active--;
  }

  /** Loads an adapter without a request (a pre-loaded adapter); false when every slot is busy. */
  preload(adapter: string): boolean {
    if (this.users.has(adapter)) return true;
    if (!this.canAcquire(adapter)) return false;
    this.acquire(adapter);
    this.release(adapter);
    return true;
  }

  /** Unloads an idle adapter; false when it is not loaded or still in use. */
  evict(adapter: string): boolean {
    if (this.users.get(adapter) !== 0) return false;
    this.users.delete(adapter);
    return true;
  }

  private idleVictim(): string | undefined {
    for (const [adapter, count] of this.users) if (count === 0) return adapter;
    return undefined;
  }
}
