// The public contract between Switchyard and a replica-selection strategy.
// Everything a strategy may see or return is declared here; nothing else in
// the router is reachable from a plugin.

/** The SDK's API version. A plugin declares the range it supports (`sdk: '^1'`). */
export const SDK_VERSION = '1.3.0';

export type Engine = 'vllm' | 'sglang';
export type Priority = 'interactive' | 'batch';

/** A request as a strategy sees it: the model, version, adapter and pool are already decided. */
export interface RoutedRequest {
  readonly id: string;
  readonly model: string;
  readonly version: string;
  /** LoRA adapter name, when the request uses one. */
  readonly adapter?: string;
  readonly pool: string;
  readonly tenant: string;
  readonly conversationId?: string;
  readonly priority: Priority;
  readonly promptTokens: number;
  readonly maxTokens: number;
  /**
   * Chained hashes of the prompt's leading blocks (see `prefixHashes` in the
   * SDK helpers): element i identifies the first i+1 blocks. The first block
   * is seeded with model and adapter, as the engine's own cache is split by them.
   */
  readonly prefixHashes: readonly number[];
  /**
   * (SDK 1.3) The prompt's token ids exactly as the engine will see them
   * (chat template applied), present only when the router counted them with
   * the model's tokenizer. Look them up with `kvIndex.longestPrefixOfTokens`.
   */
  readonly promptTokenIds?: Uint32Array;
}

/** Load signals of one replica, each with its age. */
export interface LoadSignals {
  /** Fraction of the KV cache in use, 0..1. */
  readonly kvUsage: number;
  /** Requests waiting in the engine's queue. */
  readonly queueDepth: number;
  /** Requests in the engine's running batch. */
  readonly running: number;
  /** Requests this router has in flight on the replica: exact and always fresh. */
  readonly inFlight: number;
  /**
   * Load in tokens (absent where the router does not track it): prompt tokens this
   * router sent that have not reached their first byte, i.e. prefill still in
   * progress, and the streams it has open. Exact and always fresh.
   */
  readonly prefillTokens?: number;
  readonly activeStreams?: number;
  /** prefillTokens over the pool's `token_load.full_prefill_tokens`, 0..1: the token valve strategies may release on. */
  readonly tokenLoad?: number;
  /** Adapters the engine reports loaded (or the configured ones before a scrape). */
  readonly loadedAdapters: readonly string[];
  /** Milliseconds since the engine's signals were scraped; Infinity when never. */
  readonly ageMs: number;
  /**
   * True when the scraped signals are older than the router's max staleness:
   * kvUsage, queueDepth and running are then estimated from `inFlight`.
   */
  readonly stale: boolean;
}

/** A replica a strategy may pick. Only ready, non-draining, healthy replicas are candidates. */
export interface Candidate {
  readonly id: string;
  readonly url: string;
  readonly engine: Engine;
  /** Saturated replicas are deprioritized by the router, never excluded. */
  readonly saturated: boolean;
  readonly signals: LoadSignals;
  readonly capacity: ReplicaCapacity;
}

export interface ReplicaCapacity {
  /** Most LoRA adapters the engine holds at once. */
  readonly maxLoras: number;
  /** Largest running batch (the engine's max_num_seqs). */
  readonly maxBatch: number;
  /** Queue depth that counts as a full queue in the load score. */
  readonly maxQueue: number;
}

/** Weights of the load score: 0.6 / 0.3 / 0.1 by default (`DEFAULT_LOAD_SCORE_WEIGHTS`). */
export interface LoadScoreWeights {
  readonly kvUsage: number;
  readonly queue: number;
  readonly running: number;
  /** Weight of `signals.tokenLoad` (prefill in flight); 0 or absent by default. */
  readonly tokenLoad?: number;
}

export interface Alternative {
  readonly replica: string;
  /** Lower is better for load scores; a strategy says what its score means in `reason`. */
  readonly score?: number;
  readonly note?: string;
}

/** A strategy's answer: the replica it picks, why, and what else it weighed. */
export interface ReplicaPick {
  readonly replica: string;
  readonly reason: string;
  readonly alternatives?: readonly Alternative[];
}

/** Returned by `pick` to let the next strategy in the chain decide. */
export interface Pass {
  readonly pass: true;
  readonly reason: string;
}

export type PickResult = ReplicaPick | Pass | null | undefined;

export interface Logger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
}

/** How much of a prompt one replica's KV cache holds, as its engine's KV events report it. */
export interface CachedPrefix {
  readonly replica: string;
  /** Leading blocks of the prompt (its `prefixHashes`) the replica's cache holds. */
  readonly blocks: number;
  /** Milliseconds since the replica's last KV event batch; Infinity when none came yet. */
  readonly ageMs: number;
  /** (SDK 1.3) From `longestPrefixOfTokens`: the leading tokens those blocks hold (blocks × the replica's block size). */
  readonly tokens?: number;
}

/**
 * Which replica holds which KV blocks, fed by the engines' KV cache events
 * (vLLM's BlockStored / BlockRemoved over ZeroMQ; the simulator's engines the
 * same). Every router subscribes to every engine, so every router sees the
 * same index. Block hashes are those of `RoutedRequest.prefixHashes`.
 */
export interface KvIndexView {
  /**
   * For every replica whose events the router receives: how many leading
   * blocks of `hashes` its cache holds (0 when none) and how old its events
   * are. Replicas that publish no events are absent.
   */
  longestPrefix(hashes: readonly number[]): readonly CachedPrefix[];
  /**
   * (SDK 1.3) The same for a prompt's token ids (`RoutedRequest.promptTokenIds`)
   * and adapter, matched against the token ids the engines report storing,
   * whatever the engines hash with. This is how a real vLLM or SGLang is matched.
   */
  longestPrefixOfTokens?(tokenIds: ArrayLike<number>, adapter?: string): readonly CachedPrefix[];
}

/** What the router hands a strategy when creating it. */
export interface StrategyContext {
  /** Seeded random source in [0, 1): the same seed gives the same picks. */
  readonly random: () => number;
  /** Milliseconds; virtual time in the simulator. */
  readonly now: () => number;
  readonly log: Logger;
  /** The pool this instance serves. */
  readonly pool: string;
  /** The pool's load-score weights (0.6 / 0.3 / 0.1 unless the policy says otherwise). */
  readonly loadScoreWeights: LoadScoreWeights;
  /** State handed over by the instance this one replaces on a reload (see `exportState`). */
  readonly previousState?: unknown;
  /** The engines' KV cache contents, when replicas publish KV events (absent in routers that have no index). */
  readonly kvIndex?: KvIndexView;
}

export interface StrategyInstance {
  /** Picks one of `candidates`, or passes. Must not throw; must return only a given candidate. */
  pick(request: RoutedRequest, candidates: readonly Candidate[]): PickResult;
  /** Called once the router admitted the request on `replica`. */
  onRouted?(request: RoutedRequest, replica: string): void;
  /** Called when the request finished on `replica` (ok false on error or abort). */
  onCompleted?(request: RoutedRequest, replica: string, ok: boolean): void;
  /** State to hand to the instance that replaces this one on a reload. */
  exportState?(): unknown;
  /** Releases what the instance holds; may be called more than once. */
  dispose?(): void;
}

/** A JSON Schema (draft 2020-12 or 07) for a strategy's config. */
export type JsonSchema = Record<string, unknown>;

export interface StrategyDefinition<Config = Record<string, unknown>> {
  /** Registry name: what a policy's strategy chain refers to. */
  readonly name: string;
  /** The plugin's own version. */
  readonly version: string;
  /** The SDK versions the plugin supports, as a semver range: '^1'. */
  readonly sdk: string;
  readonly description?: string;
  /** Validates the `config` a policy gives this strategy; defaults are filled in. */
  readonly configSchema?: JsonSchema;
  create(config: Config, ctx: StrategyContext): StrategyInstance;
}

export function isPass(result: PickResult): result is Pass {
  return result != null && (result as Pass).pass === true;
}
