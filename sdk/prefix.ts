import { hashRange, hashString, mixHashes } from './hashing.ts';

/** About 16 tokens of ~4 characters: one engine KV block. */
export const DEFAULT_PREFIX_BLOCK_CHARS = 64;
export const DEFAULT_PREFIX_MAX_BLOCKS = 256;

/** The first block's seed: an adapter splits the engine's cache, so it is part of the key. */
export function prefixSeed(model: string, adapter?: string): string {
  return adapter ? `${model}\0${adapter}` : model;
}

/**
 * Chained hashes over fixed blocks of a rendered prompt, as prefix-aware
 * routers do it: element i identifies the first i+1 blocks, so two prompts
 * share element i exactly when they share their first i+1 blocks. The first
 * block is seeded with model and adapter, since an adapter splits the
 * engine's cache. A trailing partial block is left out: the engine cannot
 * cache it either.
 */
export function prefixHashes(
  text: string,
  seed: string,
  blockChars = DEFAULT_PREFIX_BLOCK_CHARS,
  maxBlocks = DEFAULT_PREFIX_MAX_BLOCKS,
): number[] {
  const blocks = Math.min(maxBlocks, Math.floor(text.length / blockChars));
  const out = new Array<number>(blocks);
  let previous = hashString(seed);
  for (let i = 0; i < blocks; i++) {
    previous = mixHashes(previous, hashRange(text, i * blockChars, (i + 1) * blockChars));
    out[i] = previous;
  }
  return out;
}

/** Chains already-hashed blocks (a trace's block ids) the same way. */
export function chainBlockHashes(blocks: readonly number[], seed: string): number[] {
  const out = new Array<number>(blocks.length);
  let previous = hashString(seed);
  for (let i = 0; i < blocks.length; i++) {
    previous = mixHashes(previous, blocks[i] >>> 0);
    out[i] = previous;
  }
  return out;
}
