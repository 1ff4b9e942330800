// What the routing decision knows about each replica: a read-only view that
// background loops (scrapes, health checks) keep current, and that the
// simulator fills from its own engine models.

export type ReplicaHealth =
  /** Never checked yet: treated as ready, so a fresh router can serve. */
  | 'unknown'
  | 'ready'
  /** Loading or warming up: excluded. */
  | 'not_ready'
  /** Failed consecutive health checks: excluded until consecutive successes. */
  | 'failing'
  /**
   * Passive health: the proxy's own requests failed in a row (outlier
   * detection). Excluded for a back-off, unless too little of its pool is
   * left (panic); a passing health check after the back-off brings it back.
   */
  | 'ejected'
  /** Finishing in-flight work, taking no new requests: excluded. */
  | 'draining';

/** One replica's signals. Scraped values are absent until the first scrape. */
export interface ReplicaState {
  readonly health: ReplicaHealth;
  readonly kvUsage?: number;
  readonly queueDepth?: number;
  readonly running?: number;
  /** Adapters the engine reports as loaded (vLLM's lora_requests_info). */
  readonly loadedAdapters?: readonly string[];
  /** Clock time (ms) of the last successful scrape. */
  readonly scrapedAt?: number;
  /** Clock time (ms) of the last health check that got an answer or failed. */
  readonly checkedAt?: number;
  /** Most LoRA adapters the engine holds at once (vLLM's max_lora), when it reports it. */
  readonly maxLoras?: number;
  /** Prefix-cache hit ratio, 0..1: over the last scrape interval (vLLM) or as SGLang reports it. */
  readonly prefixCacheHitRatio?: number;
  /** KV-cache blocks on the GPU (vLLM's num_gpu_blocks). */
  readonly numGpuBlocks?: number;
  /** KV-cache capacity in tokens. */
  readonly kvCapacityTokens?: number;
  /** Requests this router has in flight on the replica: exact and always fresh. */
  readonly inFlight: number;
  /** Prompt tokens this router sent that have not reached their first byte (prefill in progress); absent: none. */
  readonly prefillTokens?: number;
  /** Streams this router has open on the replica; absent: none. */
  readonly activeStreams?: number;
}

export interface FleetView {
  replica(id: string): ReplicaState | undefined;
  /**
   * Optional change feed. A fleet that has one counts every change to any
   * replica's state (a new state object each time, never one mutated in
   * place), and names the replicas changed since an earlier count; undefined
   * when it can no longer say. Decisions then revisit only those replicas; a
   * fleet without it is read whole on every decision. With `into`, the ids
   * are written there (its length set) and it is returned: a reader's reused
   * array, not one made per decision.
   */
  readonly changes?: {
    readonly count: number;
    since(count: number, into?: string[]): readonly string[] | undefined;
  };
}

/** A fleet nobody has observed: every replica unknown and idle (explain without --fleet). */
export const EMPTY_FLEET: FleetView = { replica: () => undefined };
