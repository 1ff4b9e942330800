// A paged KV cache with prefix caching, with vLLM V1's block-pool behaviour:
// blocks with reference counts, a prefix → block map for full prompt blocks,
// one free queue in LRU order. A freed block keeps its prefix (and so its
// cached tokens) until allocation takes it from the head of the queue; a hit
// on such a block takes it back out of the queue. Freed blocks with no cached
// prefix go to the head of the queue, cached ones to the tail, a request's
// last blocks before its first, so a prompt's tail is evicted before the
// prefix it shares.
//
// Which physical block holds what is never observable, so this model keeps
// ranges instead of blocks: the free queue is [uncached blocks (a count)]
// followed by a linked list of segments, each a range of one stream's blocks
// (see prompt-blocks.ts) that share a reference count and are evicted from
// their highest block down. A stream's cached blocks are a short sorted list
// of such segments. Every operation costs per range, not per block: a
// synthetic prompt of ~70 blocks is two ranges. `test/emulator/` checks it
// against a block-by-block model of the same rules.
import type { PromptBlocks } from './prompt-blocks.ts';

/**
 * Told when blocks enter and leave the prefix cache (vLLM's BlockStored and
 * BlockRemoved): what a KV event publisher needs. Blocks are named as the
 * cache names them: block j of a prompt, or blocks [lo, hi) of a stream.
 */
export interface KvCacheListener {
  /** Blocks [from, to) of `prompt` became cached (a copy of a prefix cached elsewhere does not). */
  stored(prompt: PromptBlocks, from: number, to: number): void;
  /** Blocks [lo, hi) of `stream` were evicted. */
  removed(stream: number, lo: number, hi: number): void;
}

/** A range of one stream's cached blocks with one reference count; in the LRU list while unreferenced. */
class Segment {
  stream: number;
  lo: number;
  hi: number;
  ref: number;
  /** The last of its stream's list: nothing of its stream is cached after it. */
  last = false;
  /** LRU neighbours (toward the head: evicted sooner); null at the ends or while referenced. */
  prev: Segment | null = null;
  next: Segment | null = null;

  constructor(stream: number, lo: number, hi: number, ref: number) {
    this.stream = stream;
    this.lo = lo;
    this.hi = hi;
    this.ref = ref;
  }
}

/**
 * The blocks one request holds: references on cached ranges, in prompt
 * order, plus private blocks. Reused from request to request: the arrays
 * keep their storage and `ranges` says how much of them is in use.
 */
export class KvHolding {
  /**
   * Stream, first and end block of each cached range held: the first
   * `ranges` entries, except that the last range's stream and end are
   * `lastStream` and `lastHi` (his[ranges - 1] is written when another range
   * is added or the holding is read): a decode that fills a block extends the
   * last range without loading the arrays.
   */
  readonly streams: number[] = [];
  readonly los: number[] = [];
  readonly his: number[] = [];
  ranges = 0;
  lastStream = 0;
  lastHi = 0;
  /** Blocks holding nothing cached: output, a prompt tail not yet cached, copies of prefixes cached elsewhere. */
  privateBlocks = 0;
  /**
   * The segment this holding's last cached blocks went into and the end of
   * the prompt run it belongs to: a decode that fills the next block of that
   * run extends it without looking the stream up.
   */
  extending: Segment | null = null;
  extendingEnd = 0;

  get size(): number {
    this.flush();
    let n = this.privateBlocks;
    for (let i = 0; i < this.ranges; i++) n += this.his[i] - this.los[i];
    return n;
  }

  /** Writes the last range's end into `his`. */
  flush(): void {
    if (this.ranges > 0) this.his[this.ranges - 1] = this.lastHi;
  }

  add(stream: number, lo: number, hi: number): void {
    this.flush();
    this.lastStream = stream;
    this.lastHi = hi;
    const i = this.ranges++;
    if (i === this.los.length) {
      this.streams.push(stream);
      this.los.push(lo);
      this.his.push(hi);
    } else {
      this.streams[i] = stream;
      this.los[i] = lo;
      this.his[i] = hi;
    }
  }
}

export class KvCache {
  readonly numBlocks: number;
  readonly blockSize: number;

  /** Free blocks with no cached prefix: reused first. */
  private uncachedFree: number;
  /** Cached blocks no request references: the LRU list's blocks. */
  private lruBlocks = 0;
  private cached = 0;
  private head: Segment | null = null;
  private tail: Segment | null = null;
  /** Each stream's cached segments, sorted and disjoint. Keys are int32 so that they stay small integers. */
  private readonly byStream = new Map<number, Segment[]>();
  private lastUnreferenced = 0;
  /** Set by whoever publishes KV events; unset, the cache reports nothing. */
  listener: KvCacheListener | undefined;

  constructor(numBlocks: number, blockSize: number) {
    this.numBlocks = numBlocks;
    this.blockSize = blockSize;
    this.uncachedFree = numBlocks;
  }

  /** Blocks in the free queue, cached-but-unreferenced ones included (vLLM counts them free). */
  get freeBlocks(): number {
    return this.uncachedFree + this.lruBlocks;
  }

  /** Fraction of blocks referenced by requests: vLLM's kv_cache_usage_perc. */
  get usage(): number {
    return this.numBlocks === 0 ? 0 : 1 - this.freeBlocks / this.numBlocks;
  }

  /** Blocks that hold a cached prefix, referenced or not. */
  get cachedBlocks(): number {
    return this.cached;
  }

  /** Blocks needed to hold `tokens` tokens. */
  blocksFor(tokens: number): number {
    return Math.ceil(tokens / this.blockSize);
  }

  /**
   * How many leading blocks of a prompt are cached, at most `maxBlocks`.
   * `unreferencedFound` then says how many of them sit in the free queue.
   */
  lookup(prompt: PromptBlocks, maxBlocks: number): number {
    const { streams, ends } = prompt;
    let at = 0;
    let unreferenced = 0;
    for (let r = 0; r < ends.length && at < maxBlocks; r++) {
      const end = ends[r] < maxBlocks ? ends[r] : maxBlocks;
      const list = this.byStream.get(streams[r] | 0);
      if (list === undefined) break;
      for (let i = indexAfter(list, at); i < list.length && at < end; i++) {
        const segment = list[i];
        if (segment.lo > at) break;
        const upTo = segment.hi < end ? segment.hi : end;
        if (segment.ref === 0) unreferenced += upTo - at;
        at = upTo;
      }
      if (at < end) break;
    }
    this.lastUnreferenced = unreferenced;
    return at;
  }

  /** Of the blocks the last lookup found, those sitting in the free queue. */
  get unreferencedFound(): number {
    return this.lastUnreferenced;
  }

  /** A new, empty holding for a request. */
  newHolding(): KvHolding {
    return new KvHolding();
  }

  /** Takes a reference on the first `count` blocks of `prompt` (all cached: the last lookup found them). */
  acquireFound(holding: KvHolding, prompt: PromptBlocks, count: number): void {
    const { streams, ends } = prompt;
    let start = 0;
    for (let r = 0; r < ends.length && start < count; r++) {
      const end = ends[r] < count ? ends[r] : count;
      if (end <= start) continue;
      const stream = streams[r] | 0;
      const list = this.byStream.get(stream)!;
      let i = indexAfter(list, start);
      if (list[i].lo < start) this.split(list, i++, start);
      for (; i < list.length && list[i].lo < end; i++) {
        if (list[i].hi > end) this.split(list, i, end);
        const segment = list[i];
        if (segment.ref++ === 0) {
          this.unlink(segment);
          this.lruBlocks -= segment.hi - segment.lo;
        }
      }
      holding.add(stream, start, end);
      start = end;
    }
  }

  /**
   * Takes `count` blocks from the head of the free queue for `holding`:
   * uncached ones first, then the oldest cached prefixes, which are evicted.
   * The caller has checked `freeBlocks`.
   */
  allocate(holding: KvHolding, count: number): void {
    holding.privateBlocks += count;
    const uncached = count < this.uncachedFree ? count : this.uncachedFree;
    this.uncachedFree -= uncached;
    let evict = count - uncached;
    while (evict > 0) {
      const segment = this.head!;
      const size = segment.hi - segment.lo;
      const n = evict < size ? evict : size;
      segment.hi -= n;
      this.lruBlocks -= n;
      this.cached -= n;
      evict -= n;
      this.listener?.removed(segment.stream, segment.hi, segment.hi + n);
      if (n === size) {
        this.unlink(segment);
        this.remove(segment);
      }
    }
  }

  /**
   * Blocks [from, to) of `prompt`, held privately by `holding`, are now
   * computed: each becomes the cached copy of its prefix, unless another
   * block holds that prefix already (two requests computed it at once), in
   * which case the first stays the cached copy, as in vLLM.
   */
  cache(holding: KvHolding, prompt: PromptBlocks, from: number, to: number): void {
    const segment = holding.extending;
    if (segment !== null && segment.hi === from && segment.last && segment.ref === 1 && to <= holding.extendingEnd) {
      // The blocks continue the segment this holding alone references, the last of its stream's
      // list (nothing cached after it): what cacheRange would do, without finding the stream.
      segment.hi = to;
      this.extended(holding, prompt, segment.stream, from, to);
      return;
    }
    const { streams, ends } = prompt;
    let start = 0;
    for (let r = 0; r < ends.length && start < to; r++) {
      const end = ends[r] < to ? ends[r] : to;
      if (end > from) this.cacheRange(holding, prompt, streams[r] | 0, start > from ? start : from, end, ends[r]);
      start = ends[r];
    }
  }

  /** Every cached block as [stream, block] pairs, referenced or not (for tests and checks; costs per block). */
  *cachedBlockIds(): IterableIterator<[number, number]> {
    for (const [stream, list] of this.byStream) for (const segment of list) for (let j = segment.lo; j < segment.hi; j++) yield [stream, j];
  }

  /** Drops the holding's references: freed cached ranges go to the LRU tail (last blocks first), private blocks to the head. */
  release(holding: KvHolding): void {
    holding.flush();
    const { streams, los, his } = holding;
    for (let k = holding.ranges - 1; k >= 0; k--) {
      const lo = los[k];
      const list = this.byStream.get(streams[k])!;
      let i = indexAfter(list, his[k] - 1);
      if (list[i].hi > his[k]) this.split(list, i, his[k]);
      for (; i >= 0 && list[i].hi > lo; i--) {
        if (list[i].lo < lo) this.split(list, i++, lo);
        const segment = list[i];
        if (--segment.ref === 0) {
          this.lruBlocks += segment.hi - segment.lo;
          this.pushTail(segment, list, i);
        }
      }
    }
    this.uncachedFree += holding.privateBlocks;
    holding.privateBlocks = 0;
    holding.ranges = 0;
    holding.extending = null;
  }

  /** `runEnd`: the end of the prompt run these blocks belong to. */
  private cacheRange(holding: KvHolding, prompt: PromptBlocks, stream: number, from: number, to: number, runEnd: number): void {
    let list = this.byStream.get(stream);
    if (list === undefined) {
      list = [];
      this.byStream.set(stream, list);
    }
    let i = indexAfter(list, from);
    let at = from;
    while (at < to) {
      const next = i < list.length ? list[i] : undefined;
      if (next !== undefined && next.lo <= at) {
        // Cached elsewhere already: this copy stays private.
        at = next.hi < to ? next.hi : to;
        i++;
        continue;
      }
      const gapEnd = next !== undefined && next.lo < to ? next.lo : to;
      const before = i > 0 ? list[i - 1] : undefined;
      let segment: Segment;
      if (before !== undefined && before.hi === at && before.ref === 1) {
        segment = before;
        before.hi = gapEnd;
      } else {
        segment = new Segment(stream, at, gapEnd, 1);
        // Most often at the end (a request's own blocks, newly filled): a push, where splice allocates the (empty) array it returns.
        if (i === list.length) list.push(segment);
        else list.splice(i, 0, segment);
        if (i === list.length - 1) {
          if (i > 0) list[i - 1].last = false;
          segment.last = true;
        }
        i++;
      }
      holding.extending = segment;
      holding.extendingEnd = runEnd;
      this.extended(holding, prompt, stream, at, gapEnd);
      at = gapEnd;
    }
  }

  /** Blocks [from, to) of the holding's became the cached copy of their prefix (their segment already says so). */
  private extended(holding: KvHolding, prompt: PromptBlocks, stream: number, from: number, to: number): void {
    const size = to - from;
    this.cached += size;
    holding.privateBlocks -= size;
    if (holding.ranges > 0 && holding.lastStream === stream && holding.lastHi === from) holding.lastHi = to;
    else holding.add(stream, from, to);
    this.listener?.stored(prompt, from, to);
  }

  /** Splits list[i] at block `at` into [lo, at) at i and [at, hi) at i + 1; in the LRU list the upper part goes first. */
  private split(list: Segment[], i: number, at: number): void {
    const lower = list[i];
    const upper = new Segment(lower.stream, at, lower.hi, lower.ref);
    lower.hi = at;
    list.splice(i + 1, 0, upper);
    if (lower.last) {
      lower.last = false;
      upper.last = true;
    }
    if (lower.ref === 0) {
      upper.prev = lower.prev;
      upper.next = lower;
      if (lower.prev === null) this.head = upper;
      else lower.prev.next = upper;
      lower.prev = upper;
    }
  }

  /** Appends list[i], just freed, to the LRU tail; merges it into the tail segment when it continues it downward. */
  private pushTail(segment: Segment, list: Segment[], i: number): void {
    const tail = this.tail;
    if (tail !== null && tail.stream === segment.stream && tail.lo === segment.hi) {
      // The tail follows the segment in its list (list[i + 1]): the segment was not the last.
      tail.lo = segment.lo;
      list.splice(i, 1);
      return;
    }
    segment.prev = tail;
    segment.next = null;
    if (tail === null) this.head = segment;
    else tail.next = segment;
    this.tail = segment;
  }

  private unlink(segment: Segment): void {
    const { prev, next } = segment;
    if (prev === null) this.head = next;
    else prev.next = next;
    if (next === null) this.tail = prev;
    else next.prev = prev;
    segment.prev = null;
    segment.next = null;
  }

  /** Drops an empty segment from its stream's list. */
  private remove(segment: Segment): void {
    const list = this.byStream.get(segment.stream)!;
    if (list.length === 1) {
      this.byStream.delete(segment.stream);
      return;
    }
    list.splice(list.indexOf(segment), 1);
    if (segment.last) list[list.length - 1].last = true;
  }
}

/** The index of the first segment that ends after block `j` (list.length when none does). */
function indexAfter(list: readonly Segment[], j: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid].hi > j) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}
