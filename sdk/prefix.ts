import { Buffer } from 'node:buffer';
import { finalize, hashRange, hashString, hashWords, mixHashes, step } from './hashing.ts';

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
  const seedHash = seedHashOf(seed);
  if (!LITTLE_ENDIAN || blockChars % 2 !== 0 || blockChars > SCRATCH_CHARS) {
    let previous = seedHash;
    for (let i = 0; i < blocks; i++) {
      previous = mixHashes(previous, hashRange(text, i * blockChars, (i + 1) * blockChars));
      out[i] = previous;
    }
    return out;
  }
  if (blocks < MIN_REMEMBERED_BLOCKS || blocks * blockChars > MAX_REMEMBERED_CHARS) {
    hashBlocks(text, blockChars, 0, blocks, seedHash, out);
    return out;
  }
  // A few of the first block's characters and the seed name the slot: a prompt that begins as one hashed
  // lately may share more with it, and takes even its first block's hash from it.
  const key = slotKey(text, blockChars, seedHash);
  const entry = remembered[key & (REMEMBERED_SLOTS - 1)];
  const shared = recall(entry, key, text, seed, blockChars, blocks, out);
  if (shared < blocks) {
    if (shared === 0) hashBlocks(text, blockChars, 0, blocks, seedHash, out);
    else if (blocks - shared > FEW_BLOCKS) hashBlocks(text, blockChars, shared, blocks, out[shared - 1], out);
    else for (let i = shared; i < blocks; i++) out[i] = mixHashes(out[i - 1], hashRange(text, i * blockChars, (i + 1) * blockChars));
    remember(entry, key, text, seed, blockChars, blocks, out);
  }
  return out;
}

/**
 * A remembered prompt's key: eight characters spread over the first block, mixed with the seed's hash.
 * Reading them costs a fraction of hashing the block (~60 instructions a pair of characters); prompts
 * that begin alike share a key, and what they share is then found by comparing them.
 */
function slotKey(text: string, blockChars: number, seedHash: number): number {
  let h = 0;
  for (let j = 0; j < 8; j++) h = Math.imul(h ^ text.charCodeAt(blockChars - 1 - ((j * blockChars) >>> 3)), 0x01000193);
  return mixHashes(seedHash, h);
}

/**
 * Up to this many blocks are hashed from the text with charCodeAt: the native copy into the scratch
 * buffer costs more than it saves for a block or two (the first one, the new question after a shared
 * system prompt).
 */
const FEW_BLOCKS = 2;

// Seeds (model names, model and adapter) repeat on every request: hash each once.
const seedHashes = new Map<string, number>();
const MAX_SEED_HASHES = 4096;

function seedHashOf(seed: string): number {
  let h = seedHashes.get(seed);
  if (h === undefined) {
    if (seedHashes.size >= MAX_SEED_HASHES) seedHashes.clear();
    h = hashString(seed);
    seedHashes.set(seed, h);
  }
  return h;
}

/**
 * out[from, to) for blocks of `text`, chained onto `previous` (the seed's hash, or block from-1's).
 * The characters are copied natively into the scratch buffer and read as 32-bit words.
 */
function hashBlocks(text: string, blockChars: number, from: number, to: number, previous: number, out: number[]): void {
  const wordsPerBlock = blockChars / 2;
  const blocksPerCopy = Math.floor(SCRATCH_CHARS / blockChars);
  for (let first = from; first < to; first += blocksPerCopy) {
    const count = Math.min(blocksPerCopy, to - first);
    const start = first * blockChars;
    const chars = count * blockChars;
    scratchBytes.write(start === 0 ? text : text.substring(start, start + chars), 0, chars * 2, 'utf16le');
    let b = 0;
    // Blocks hash independently (only the chaining is sequential): four at a time, so that the CPU
    // overlaps their chains of multiplies instead of waiting on one (the same hashes, hashWords's).
    for (; b + 4 <= count; b += 4) {
      hashFourBlocks(scratchWords, b * wordsPerBlock, wordsPerBlock);
      for (let k = 0; k < 4; k++) out[first + b + k] = previous = mixHashes(previous, four[k]);
    }
    for (; b < count; b++) {
      previous = mixHashes(previous, hashWords(scratchWords, b * wordsPerBlock, (b + 1) * wordsPerBlock));
      out[first + b] = previous;
    }
  }
}

/** The last hashFourBlocks's answers. */
const four = new Int32Array(4);

/** hashWords of four consecutive blocks of `words` words from `start`, into `four`, interleaved. */
function hashFourBlocks(buffer: Int32Array, start: number, words: number): void {
  let h0 = 0;
  let h1 = 0;
  let h2 = 0;
  let h3 = 0;
  for (let i = start, end = start + words; i < end; i++) {
    h0 = step(h0, buffer[i]);
    h1 = step(h1, buffer[i + words]);
    h2 = step(h2, buffer[i + 2 * words]);
    h3 = step(h3, buffer[i + 3 * words]);
  }
  const length = 2 * words;
  four[0] = finalize(h0 ^ length);
  four[1] = finalize(h1 ^ length);
  four[2] = finalize(h2 ^ length);
  four[3] = finalize(h3 ^ length);
}

// Prompts hashed lately, so that the blocks a prompt shares with one of them
// (a shared system prompt or document, a conversation's earlier turns) are
// not hashed again: comparing characters is a native memory compare, about
// twenty times cheaper than hashing them. A prompt's hashes are what hashing
// it gives, remembered or not. One prompt per slot, the slot named by the
// key (slotKey); a newer prompt that adds blocks takes it.
const REMEMBERED_SLOTS = 128;
/** Shorter prompts cost less to hash than to look up. */
const MIN_REMEMBERED_BLOCKS = 8;
/** The most characters a remembered prompt's blocks cover (the default 256 blocks of 64): 128 slots keep at most 8 MB. */
const MAX_REMEMBERED_CHARS = 16_384;

/** A slot: its arrays are reused by the prompts that take it. */
class Remembered {
  /** slotKey of the prompt. */
  key = 0;
  seed = '';
  blockChars = 0;
  /** The prompt (or a copy of its hashed part): its first `blocks` blocks were hashed. */
  text = '';
  blocks = 0;
  hashes = new Uint32Array(0);
}

const remembered: Remembered[] = Array.from({ length: REMEMBERED_SLOTS }, () => new Remembered());

/**
 * How many leading blocks `text` shares with the remembered prompt, their
 * hashes copied into `out`. Most often it shares all the blocks both have,
 * or all but the last few (a new question after the same document): those
 * are tried first, then halved.
 */
function recall(entry: Remembered, key: number, text: string, seed: string, blockChars: number, blocks: number, out: number[]): number {
  if (entry.blocks === 0 || entry.key !== key || entry.seed !== seed || entry.blockChars !== blockChars) return 0;
  const most = Math.min(blocks, entry.blocks);
  let good = 0; // blocks known shared
  let bad = most + 1; // blocks known not shared (most + 1: none known)
  for (let gap = 0; most - gap > good; gap = 2 * gap + 1) {
    if (samePrefix(text, entry.text, (most - gap) * blockChars)) {
      good = most - gap;
      break;
    }
    bad = most - gap;
  }
  while (bad - good > 1) {
    const mid = (good + bad) >>> 1;
    if (samePrefix(text, entry.text, mid * blockChars)) good = mid;
    else bad = mid;
  }
  for (let i = 0; i < good; i++) out[i] = entry.hashes[i];
  return good;
}

/** Do `a` and `b` begin with the same `chars` characters? Compared with ===, natively (String#startsWith walks them a character at a time). */
function samePrefix(a: string, b: string, chars: number): boolean {
  return (chars === a.length ? a : a.substring(0, chars)) === (chars === b.length ? b : b.substring(0, chars));
}

function remember(entry: Remembered, key: number, text: string, seed: string, blockChars: number, blocks: number, out: readonly number[]): void {
  const chars = blocks * blockChars;
  entry.key = key;
  entry.seed = seed;
  entry.blockChars = blockChars;
  // A slice would keep all of a long prompt alive: past twice the hashed part, a copy of that part (flattening the pair copies it).
  entry.text = text.length <= 2 * chars ? text : ` ${text.substring(0, chars)}`.slice(1);
  entry.blocks = blocks;
  if (entry.hashes.length < blocks) entry.hashes = new Uint32Array(Math.max(blocks, 2 * entry.hashes.length));
  const hashes = entry.hashes;
  for (let i = 0; i < blocks; i++) hashes[i] = out[i];
}

/** Chains already-hashed blocks (a trace's block ids) the same way, the first `maxBlocks` of them. */
export function chainBlockHashes(blocks: readonly number[], seed: string, maxBlocks = Infinity): number[] {
  const count = Math.min(blocks.length, maxBlocks);
  const out = new Array<number>(count);
  let previous = seedHashOf(seed);
  for (let i = 0; i < count; i++) {
    previous = mixHashes(previous, blocks[i] >>> 0);
    out[i] = previous;
  }
  return out;
}
