// A prompt's cacheable blocks as the engine model sees them: runs of blocks,
// each run from one "stream". Block j of run r is identified by the pair
// (streams[r], j), so two prompts share block j exactly when they have the
// same stream there; a stream must therefore identify everything before it
// (as chained block hashes do). A synthetic prompt is a few runs (a shared
// system prompt, then a conversation's own blocks), which lets the KV cache
// work on ranges of blocks instead of one block at a time; a prompt hashed
// block by block (the emulator, a trace) is a run per block.

/** What KV events call a block: the simulator's router-side hashes, or an emulated vLLM's own (an integer or bytes). */
export type BlockName = number | bigint | Uint8Array;

export interface PromptBlocks {
  /** Each run's stream: a 32-bit key that identifies the run and everything before it. */
  readonly streams: ArrayLike<number>;
  /** Each run's end, exclusive and increasing: run r covers blocks [ends[r-1] (0 for the first), ends[r]). */
  readonly ends: ArrayLike<number>;
  /**
   * Block j's name in KV events: in the simulator, its chained hash as a
   * router computes it (sdk `prefixHashes`); in the emulator, vLLM's block
   * hash. Blocks past its end are cached but not reported.
   */
  readonly hashes?: ArrayLike<BlockName>;
  /** The token ids of block j, for KV events (BlockStored carries them). */
  readonly tokenIds?: (block: number) => number[];
  /** The LoRA adapter the blocks were computed with (KV events name it). */
  readonly adapter?: string;
}

/** A prompt with no cacheable blocks. */
export const NO_BLOCKS: PromptBlocks = { streams: [], ends: [] };

/** Per-block chained hashes (`prefixHashes`), one run each; each block's hash is its name in KV events. */
export function blocksOfHashes(hashes: readonly number[], tokenIds?: (block: number) => number[]): PromptBlocks {
  return blocksOf(hashes, hashes, tokenIds);
}

/** One run per block: `streams` tells blocks apart in the cache, `names` are what KV events call them. */
export function blocksOf(streams: readonly number[], names: readonly BlockName[], tokenIds?: (block: number) => number[]): PromptBlocks {
  return { streams, ends: Array.from({ length: streams.length }, (_, i) => i + 1), hashes: names, tokenIds };
}

/** The number of blocks a prompt's runs cover. */
export function blockCount(prompt: PromptBlocks): number {
  return prompt.ends.length === 0 ? 0 : prompt.ends[prompt.ends.length - 1];
}
