// What a workload hands the simulator: requests as a client would send
// them, with their prompt's shape as hashed blocks instead of text.
import type { Priority } from '../../sdk/index.ts';
import type { BlockRuns } from './block-runs.ts';

/** Tokens per prompt block: one KV block of the engine, ~64 characters of prompt. */
export const BLOCK_TOKENS = 16;

/** One conversation's running state: its next turn extends this turn's prompt. */
export interface SessionState {
  readonly id: number;
  /** x-conversation-id, when the workload sends one. */
  readonly conversationId?: string;
  /** Seeds the ids of the conversation's own blocks. */
  readonly blockBase: number;
  readonly systemBase: number;
  readonly systemBlocks: number;
  readonly model: string;
  readonly apiKeyHash?: string;
  readonly priority?: Priority;
  readonly tenantIndex: number;
  turnsLeft: number;
}

export interface SimRequestSpec {
  /** Arrival time, virtual ms. */
  readonly at: number;
  /** What the client puts in `model`: an alias, a model id or an adapter name. */
  readonly model: string;
  /** sha256 of the API key, as the router hashes it; undefined when anonymous. */
  readonly apiKeyHash?: string;
  readonly conversationId?: string;
  readonly priority?: Priority;
  readonly deadlineMs?: number;
  readonly promptTokens: number;
  /** Tokens the engine will generate. */
  readonly outputTokens: number;
  /** The client's max_tokens (undefined: the router assumes its default). */
  readonly maxTokens?: number;
  readonly messageCount: number;
  /**
   * The last message's text when the workload gives one (code_fraction); a
   * simulated prompt is otherwise described by its blocks alone.
   */
  readonly text?: string;
  /** The prompt's full blocks as runs of raw block ids (the router and the engine chain them). */
  readonly blocks: BlockRuns;
  /**
   * The full blocks of prompt and answer together: what the engine caches, as
   * vLLM caches generated blocks too. A conversation's next turn repeats the
   * answer, so its prompt's blocks continue these. Default: `blocks`.
   */
  readonly sequenceBlocks?: BlockRuns;
  /** A label for grouping results: standard, long-context, trace. */
  readonly klass: string;
  /** 1 for a single request or a conversation's first turn. */
  readonly turn: number;
  readonly session?: SessionState;
}

/** A stream of requests in arrival order, plus conversations' follow-up turns. */
export interface RequestSource {
  /** The next new arrival (never earlier than the last one), or undefined when the workload is done. */
  next(): SimRequestSpec | undefined;
  /** The next turn of `previous`'s conversation, sent after its answer finished at `finishedAt`. */
  followUp(previous: SimRequestSpec, finishedAt: number): SimRequestSpec | undefined;
  /** Releases what the source holds (an open trace file). */
  close(): void;
}
