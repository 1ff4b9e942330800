// The engine model's KV cache as it was first written, block by block, now
// the reference the range-based cache (sim/engine/kv-cache.ts) is checked
// against: fixed-size blocks with reference counts, a hash → block map for
// full prompt blocks, and one free queue in LRU order. A freed block keeps
// its hash (and so its cached tokens) until allocation takes it from the
// head of the queue; a prefix hit on such a block takes it back out of the
// queue.
import type { PromptBlocks } from '../../sim/engine/prompt-blocks.ts';
import { HashIndex } from './hash-index.ts';

const NONE = -1;

export class KvCache {
  readonly numBlocks: number;
  readonly blockSize: number;

  private readonly refCount: Int32Array;
  private readonly blockHash: Float64Array;
  private readonly hashed: Uint8Array;
  private readonly byHash: HashIndex;
  // The free queue: a doubly linked list over block ids, head = evicted first.
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private head = NONE;
  private tail = NONE;
  private free: number;
  // Block ids of the last lookup(); valid until the next one.
  private readonly found: Int32Array;

  constructor(numBlocks: number, blockSize: number) {
    this.numBlocks = numBlocks;
    this.blockSize = blockSize;
    this.refCount = new Int32Array(numBlocks);
    this.blockHash = new Float64Array(numBlocks);
    this.hashed = new Uint8Array(numBlocks);
    this.prev = new Int32Array(numBlocks);
    this.next = new Int32Array(numBlocks);
    this.found = new Int32Array(numBlocks);
    this.byHash = new HashIndex(numBlocks);
    for (let b = 0; b < numBlocks; b++) {
      this.prev[b] = b - 1;
      this.next[b] = b + 1 < numBlocks ? b + 1 : NONE;
    }
    this.head = numBlocks > 0 ? 0 : NONE;
    this.tail = numBlocks - 1;
    this.free = numBlocks;
  }

  /** Blocks in the free queue, cached-but-unreferenced ones included (vLLM counts them free). */
  get freeBlocks(): number {
    return this.free;
  }

  /** Fraction of blocks referenced by requests: vLLM's kv_cache_usage_perc. */
  get usage(): number {
    return this.numBlocks === 0 ? 0 : 1 - this.free / this.numBlocks;
  }

  /** Blocks that hold a cached prefix, referenced or not. */
  get cachedBlocks(): number {
    return this.byHash.size;
  }

  /** Blocks needed to hold `tokens` tokens. */
  blocksFor(tokens: number): number {
    return Math.ceil(tokens / this.blockSize);
  }

  /**
   * How many leading blocks of a prompt are cached, at most `maxBlocks`.
   * Remembers their ids for `unreferencedFound` and `acquireFound`.
   */
  lookup(hashes: readonly number[], maxBlocks: number): number {
    const limit = Math.min(maxBlocks, hashes.length);
    let count = 0;
    while (count < limit) {
      const block = this.byHash.get(hashes[count]);
      if (block < 0) break;
      this.found[count++] = block;
    }
    return count;
  }

  /** Among the first `count` blocks of the last lookup, those sitting in the free queue. */
  unreferencedFound(count: number): number {
    let n = 0;
    for (let i = 0; i < count; i++) if (this.refCount[this.found[i]] === 0) n++;
    return n;
  }

  /** Takes a reference on the first `count` blocks of the last lookup, appending them to `into`. */
  acquireFound(count: number, into: number[]): void {
    for (let i = 0; i < count; i++) {
      const block = this.found[i];
      if (this.refCount[block]++ === 0) this.unlink(block);
      into.push(block);
    }
  }

  /** `acquireFound` into a typed array at `at`; returns the new length. */
  acquireFoundAt(count: number, into: Int32Array, at: number): number {
    const found = this.found;
    const refCount = this.refCount;
    for (let i = 0; i < count; i++) {
      const block = found[i];
      if (refCount[block]++ === 0) this.unlink(block);
      into[at++] = block;
    }
    return at;
  }

  /**
   * `allocate` into a typed array at `at` (the caller has checked
   * `freeBlocks`); returns the new length.
   */
  allocateAt(count: number, into: Int32Array, at: number): number {
    const hashed = this.hashed;
    const refCount = this.refCount;
    const next = this.next;
    let block = this.head;
    for (let i = 0; i < count; i++) {
      if (hashed[block] === 1) {
        this.byHash.deleteIf(this.blockHash[block], block);
        hashed[block] = 0;
      }
      refCount[block] = 1;
      into[at++] = block;
      block = next[block];
    }
    // The first `count` blocks of the queue leave it at once.
    this.head = block;
    if (block === NONE) this.tail = NONE;
    else this.prev[block] = NONE;
    this.free -= count;
    return at;
  }

  /** `release` of the first `count` blocks of a typed array. */
  releaseAt(blocks: Int32Array, count: number): void {
    const refCount = this.refCount;
    const hashed = this.hashed;
    for (let i = count - 1; i >= 0; i--) {
      const block = blocks[i];
      if (--refCount[block] !== 0) continue;
      if (hashed[block] === 1) this.pushTail(block);
      else this.pushHead(block);
    }
  }

  /**
   * Takes `count` blocks from the head of the free queue (evicting the
   * oldest cached prefixes), appending them to `into`. All or nothing.
   */
  allocate(count: number, into: number[]): boolean {
    if (count > this.free) return false;
    for (let i = 0; i < count; i++) {
      const block = this.head;
      this.unlink(block);
      if (this.hashed[block] === 1) {
        this.byHash.deleteIf(this.blockHash[block], block);
        this.hashed[block] = 0;
      }
      this.refCount[block] = 1;
      into.push(block);
    }
    return true;
  }

  /**
   * Records that a full block holds the prefix identified by `hash`. When
   * another block already holds it (two requests computed it at once), the
   * first stays the cached copy, as in vLLM.
   */
  cache(block: number, hash: number): void {
    if (!this.byHash.add(hash, block)) return;
    this.blockHash[block] = hash;
    this.hashed[block] = 1;
  }

  /**
   * Drops one reference on each block. Freed blocks that hold a cached
   * prefix go to the tail in reverse order, so a prompt's last blocks are
   * evicted before its first ones (its shared prefix); freed blocks with no
   * cached content go to the head, to be reused first.
   */
  release(blocks: readonly number[]): void {
    for (let i = blocks.length - 1; i >= 0; i--) {
      const block = blocks[i];
      if (--this.refCount[block] !== 0) continue;
      if (this.hashed[block] === 1) this.pushTail(block);
      else this.pushHead(block);
    }
  }

  private unlink(block: number): void {
    const p = this.prev[block];
    const n = this.next[block];
    if (p === NONE) this.head = n;
    else this.next[p] = n;
    if (n === NONE) this.tail = p;
    else this.prev[n] = p;
    this.free--;
  }

  private pushTail(block: number): void {
    this.prev[block] = this.tail;
    this.next[block] = NONE;
    if (this.tail === NONE) this.head = block;
    else this.next[this.tail] = block;
    this.tail = block;
    this.free++;
  }

  private pushHead(block: number): void {
    this.prev[block] = NONE;
    this.next[block] = this.head;
    if (this.head === NONE) this.tail = block;
    else this.prev[this.head] = block;
    this.head = block;
    this.free++;
  }
}

/**
 * The run-based cache's interface (sim/engine/kv-cache.ts) over this
 * block-by-block model, for checking one against the other: a prompt's block
 * (stream, j) becomes one interned hash.
 */
export class BlockByBlockCache {
  private readonly kv: KvCache;
  private readonly ids = new Map<string, number>();
  private lastFound = 0;

  constructor(numBlocks: number, blockSize: number) {
    this.kv = new KvCache(numBlocks, blockSize);
  }

  get freeBlocks(): number {
    return this.kv.freeBlocks;
  }

  get cachedBlocks(): number {
    return this.kv.cachedBlocks;
  }

  newHolding(): { blocks: number[] } {
    return { blocks: [] };
  }

  lookup(prompt: PromptBlocks, maxBlocks: number): number {
    this.lastFound = this.kv.lookup(this.hashes(prompt), maxBlocks);
    return this.lastFound;
  }

  get unreferencedFound(): number {
    return this.kv.unreferencedFound(this.lastFound);
  }

  acquireFound(holding: { blocks: number[] }, _prompt: PromptBlocks, count: number): void {
    this.kv.acquireFound(count, holding.blocks);
  }

  allocate(holding: { blocks: number[] }, count: number): void {
    if (!this.kv.allocate(count, holding.blocks)) throw new Error('allocate: not enough free blocks');
  }

  cache(holding: { blocks: number[] }, prompt: PromptBlocks, from: number, to: number): void {
    const hashes = this.hashes(prompt);
    for (let b = from; b < to; b++) this.kv.cache(holding.blocks[b], hashes[b]);
  }

  release(holding: { blocks: number[] }): void {
    this.kv.release(holding.blocks);
    holding.blocks.length = 0;
  }

  private hashes(prompt: PromptBlocks): number[] {
    const out: number[] = [];
    let start = 0;
    for (let r = 0; r < prompt.ends.length; r++) {
      for (let j = start; j < prompt.ends[r]; j++) {
        const key = `${prompt.streams[r] | 0}:${j}`;
        let id = this.ids.get(key);
        if (id === undefined) this.ids.set(key, (id = this.ids.size + 1));
        out.push(id);
      }
      start = prompt.ends[r];
    }
    return out;
  }
}
