import { Buffer } from 'node:buffer';
import { hashRange, hashString, hashWords, mixHashes } from './hashing.ts';

/** About 16 tokens of ~4 characters: one engine KV block. */
export const DEFAULT_PREFIX_BLOCK_CHARS = 64;
export const DEFAULT_PREFIX_MAX_BLOCKS = 256;

/** The first block's seed: an adapter splits the engine's cache, so it is part of the key. */
export function prefixSeed(model: string, adapter?: string): string {
  return adapter ? `${model}\0${adapter}` : model;
}

// Hashing reads the prompt's UTF-16 code units two at a time. Reading them
// with charCodeAt cost a few nanoseconds a character, most of a decision's
// time for a long prompt; copying them natively into a buffer (Node's
// 'utf16le' writes the code units as they are) and reading 32-bit words gives
// the same hashes at a fraction of the cost. Only where words are little-endian,
// which is how hashRange pairs the units.
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
/** Code units copied at once: the router's default 256 blocks of 64 characters. */
const SCRATCH_CHARS = 16_384;
const scratch = new ArrayBuffer(SCRATCH_CHARS * 2);
const scratchBytes = Buffer.from(scratch);
const scratchWords = new Int32Array(scratch);

/**
 * Chained hashes over fixed blocks of a rendered prompt, as prefix-aware
 * routers do it: element i identifies the first i+1 blocks, so two prompts
 * share element i exactly when they share their first i+1 blocks. The first
 * block is seeded with model and adapter, since an adapter splits the
 * engine's cache. A trailing partial block is left out: the engine cannot
 * cache it either. Block i's own hash is hashRange of its characters.
 */
export function prefixHashes(text: string, seed: string, blockChars = DEFAULT_PREFIX_BLOCK_CHARS, maxBlocks = DEFAULT_PREFIX_MAX_BLOCKS): number[] {
  const blocks = Math.min(maxBlocks, Math.floor(text.length / blockChars));
  const out = new Array<number>(blocks);
  let previous = hashString(seed);
  if (!LITTLE_ENDIAN || blockChars % 2 !== 0 || blockChars > SCRATCH_CHARS) {
    for (let i = 0; i < blocks; i++) {
      previous = mixHashes(previous, hashRange(text, i * blockChars, (i + 1) * blockChars));
      out[i] = previous;
    }
    return out;
  }
  const wordsPerBlock = blockChars / 2;
  const blocksPerCopy = Math.floor(SCRATCH_CHARS / blockChars);
  for (let first = 0; first < blocks; first += blocksPerCopy) {
    const count = Math.min(blocksPerCopy, blocks - first);
    const start = first * blockChars;
    const chars = count * blockChars;
    scratchBytes.write(start === 0 ? text : text.substring(start, start + chars), 0, chars * 2, 'utf16le');
    for (let b = 0; b < count; b++) {
      previous = mixHashes(previous, hashWords(scratchWords, b * wordsPerBlock, (b + 1) * wordsPerBlock));
      out[first + b] = previous;
    }
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
