// What goes into and comes out of the engine model. Times are clock times in
// milliseconds (virtual in the simulator, scaled real time in the emulator).
import type { PromptBlocks } from './prompt-blocks.ts';

export type FinishReason = 'length' | 'stop' | 'abort';

export interface EngineResult {
  readonly id: string;
  readonly promptTokens: number;
  readonly outputTokens: number;
  /** Prompt tokens served from the prefix cache when the request was first admitted. */
  readonly cachedTokens: number;
  readonly finishReason: FinishReason;
  /** Times this request was preempted (its KV dropped and recomputed). */
  readonly preempted: number;
  readonly arrivedAt: number;
  /** NaN when the request ended before its first token. */
  readonly firstTokenAt: number;
}

export interface EngineRequest {
  readonly id: string;
  readonly promptTokens: number;
  /** The engine generates exactly this many tokens. */
  readonly maxTokens: number;
  /**
   * The prompt's cacheable blocks (see prompt-blocks.ts); may cover fewer
   * blocks than the prompt has. None when absent.
   */
  readonly blocks?: PromptBlocks;
  readonly adapter?: string;
  /** Reported when maxTokens tokens are out: 'stop' for a natural end, 'length' (default) for a cut. */
  readonly finishReason?: 'length' | 'stop';
  onFirstToken?(t: number): void;
  /** Every generated token; leave unset when only first-token and finish times matter. */
  onToken?(index: number, t: number): void;
  onFinish?(result: EngineResult, t: number): void;
}

/** A point-in-time view of one replica, with vLLM's counters. */
export interface EngineMetrics {
  readonly running: number;
  readonly waiting: number;
  /** Fraction of KV blocks in use, 0..1. */
  readonly kvUsage: number;
  readonly blockSize: number;
  readonly numGpuBlocks: number;
  /** Prompt tokens looked up in the prefix cache (vLLM's prefix_cache_queries). */
  readonly prefixCacheQueries: number;
  /** Of those, tokens found cached (vLLM's prefix_cache_hits). */
  readonly prefixCacheHits: number;
  readonly preemptions: number;
  /** Prompt tokens of requests that produced a first token. */
  readonly promptTokens: number;
  readonly generationTokens: number;
  readonly finished: Readonly<Record<FinishReason, number>>;
  readonly maxLoras: number;
  /** Adapters in GPU slots, least recently used first. */
  readonly loadedAdapters: readonly string[];
  /** Adapters of running requests (vLLM's running_lora_adapters). */
  readonly runningAdapters: readonly string[];
  /** Adapters of waiting requests (vLLM's waiting_lora_adapters). */
  readonly waitingAdapters: readonly string[];
  /** Mean over non-empty steps of the distinct adapters in the batch. */
  readonly meanDistinctAdapters: number;
  readonly steps: number;
}
