// Which replica holds which KV blocks: the engines' KV cache events (vLLM's
// and SGLang's BlockStored / BlockRemoved / AllBlocksCleared) applied to one
// set of block names per replica. Strategies read it through the SDK
// (`ctx.kvIndex`). Every router subscribes to every engine, so all routers'
// indexes converge on the engines' truth.
//
// Blocks are named by their token content (kv-keys.ts), not by the engine's
// hash: a stored block's name chains its parent's name with its token ids, and
// the engine hash → name map follows removals and parents. Only the engine's
// own (GPU) cache of the main attention group is indexed; the block size is
// learned from the events. Bounded: at most `maxBlocksPerReplica` blocks per
// replica (an engine reporting more is reset, counted); anything odd is
// skipped and counted, never thrown.
import type { CachedPrefix, KvIndexView } from '../../sdk/index.ts';
import type { BlocksRemoved, BlocksStored, KvEvent, KvEventBatch } from './kv-events.ts';
import { chainKey, MAX_LOOKUP_BLOCKS, noteBlockSize, rootKey, TokenBlockKeys } from './kv-keys.ts';

/** A block's name in the index. */
export type BlockKey = number;

export interface KvIndexCounters {
  batches: number;
  events: number;
  /** Frames that were not a KV event batch (wrong frame count, bad msgpack, wrong shape, over a bound). */
  malformed: number;
  /** Batches whose sequence number was not after the last one (duplicates, reordering): dropped. */
  outOfOrder: number;
  /** Batches after a gap in sequence numbers that replay could not fill: applied, but some events were missed. */
  gaps: number;
  /** Batches recovered from an engine's replay socket. */
  replayed: number;
  /** Events of a kind the index does not know: skipped. */
  unknownEvents: number;
  /** Events of a known kind with wrong fields (token ids out of range, bad extra keys): skipped. */
  invalidEvents: number;
  /** Batches from a replica the policy does not (or no longer) name: dropped. */
  unknownReplica: number;
  /** Replicas reset for holding more blocks than the bound. */
  overflows: number;
  /** Blocks of another tier (CPU offload) or attention group (sliding window): not indexed. */
  otherTier: number;
  /** Hashes without a full block of token ids: dropped. */
  partialBlocks: number;
  /** Blocks whose parent the index never saw (stored before the router listened, or in a missed batch): skipped. */
  unknownParent: number;
  /** Times a replica's block size changed: its blocks were dropped. */
  blockSizeChanges: number;
  /** Batches over the per-replica rate: dropped (replayed later when the engine has a replay socket). */
  rateLimited: number;
  /** Messages over the size bound: the connection was dropped and remade. */
  oversized: number;
  /** Batches dropped because the decoder had too much waiting. */
  overloaded: number;
}

class ReplicaBlocks {
  /** Block name → how many engine blocks have that name (hashes differing only in what the index ignores). */
  readonly blocks = new Map<BlockKey, number>();
  /** The engine's hash (folded) → the block's name. */
  readonly engine = new Map<number, BlockKey>();
  blockSize = 0;
  /** The attention group stored blocks came from (vLLM's group_idx), once known. */
  mainGroup: number | null = null;
  lastSeq = -1n;
  lastEventAt = -Infinity;
  /** Hashes and events admitted in the current one-second window. */
  window = { start: -Infinity, hashes: 0, events: 0 };
  constructor(readonly id: string) {}
}

export interface KvIndexOptions {
  readonly now: () => number;
  readonly maxBlocksPerReplica?: number;
  /** Per replica and second, the most block hashes and events accepted from the network. */
  readonly hashesPerSecond?: number;
  readonly eventsPerSecond?: number;
}

/** Block operations applied before `applySliced` yields to the event loop. */
const SLICE_BLOCKS = 2_048;

export class KvIndex implements KvIndexView {
  readonly counters: KvIndexCounters = {
    batches: 0,
    events: 0,
    malformed: 0,
    outOfOrder: 0,
    gaps: 0,
    replayed: 0,
    unknownEvents: 0,
    invalidEvents: 0,
    unknownReplica: 0,
    overflows: 0,
    otherTier: 0,
    partialBlocks: 0,
    unknownParent: 0,
    blockSizeChanges: 0,
    rateLimited: 0,
    oversized: 0,
    overloaded: 0,
  };
  /** Lookups of a prompt, and those that found at least one block on some replica. */
  readonly lookups = { total: 0, matched: 0, lastMatchAt: -Infinity };
  private readonly now: () => number;
  private readonly maxBlocks: number;
  private readonly hashesPerSecond: number;
  private readonly eventsPerSecond: number;
  private readonly replicas = new Map<string, ReplicaBlocks>();

  constructor(options: KvIndexOptions) {
    this.now = options.now;
    this.maxBlocks = options.maxBlocksPerReplica ?? 1 << 18;
    this.hashesPerSecond = options.hashesPerSecond ?? 262_144;
    this.eventsPerSecond = options.eventsPerSecond ?? 32_768;
  }

  /** Replicas whose events are expected; batches from others are dropped. */
  track(replica: string): void {
    if (!this.replicas.has(replica)) this.replicas.set(replica, new ReplicaBlocks(replica));
  }

  /** Forgets a replica and its blocks (it left the policy, or its publisher restarted). */
  forget(replica: string): void {
    const entry = this.replicas.get(replica);
    if (!entry) return;
    this.clear(entry);
    this.replicas.delete(replica);
  }

  tracked(): string[] {
    return [...this.replicas.keys()];
  }

  /** Blocks the index holds for a replica. */
  blockCount(replica: string): number {
    return this.replicas.get(replica)?.blocks.size ?? 0;
  }

  /** All blocks held, over every replica. */
  totalBlocks(): number {
    let n = 0;
    for (const entry of this.replicas.values()) n += entry.blocks.size;
    return n;
  }

  /** The block size learned from a replica's events; 0 before the first stored block. */
  blockSize(replica: string): number {
    return this.replicas.get(replica)?.blockSize ?? 0;
  }

  /**
   * The leading tokens of a prompt (its token ids) one replica's cache holds:
   * the uncached rest is the prefill it has to do (core/fleet/uncached-prompt.ts).
   * Not a routing lookup: not counted in the lookup metrics.
   */
  cachedTokens(replica: string, tokenIds: ArrayLike<number>, adapter?: string): number {
    const entry = this.replicas.get(replica);
    if (entry === undefined || entry.blockSize === 0) return 0;
    const keys = new TokenBlockKeys(tokenIds, entry.blockSize, adapter, MAX_LOOKUP_BLOCKS);
    let depth = 0;
    while (depth < keys.length && entry.blocks.has(keys.keyAt(depth))) depth++;
    return depth * entry.blockSize;
  }

  /** The last sequence number applied for a replica (-1 before the first). */
  lastSeq(replica: string): bigint {
    return this.replicas.get(replica)?.lastSeq ?? -1n;
  }

  /**
   * Whether a batch from the network fits the replica's rate (hashes and
   * events per second); counts it when it does not. The simulator does not ask.
   */
  admit(replica: string, batch: KvEventBatch): boolean {
    const entry = this.replicas.get(replica);
    if (!entry) return true;
    const now = this.now();
    const w = entry.window;
    if (now - w.start >= 1000) {
      w.start = now;
      w.hashes = 0;
      w.events = 0;
    }
    const hashes = batch.hashCount ?? 0;
    if (w.hashes + hashes > this.hashesPerSecond || w.events + batch.events.length > this.eventsPerSecond) {
      this.counters.rateLimited++;
      return false;
    }
    w.hashes += hashes;
    w.events += batch.events.length;
    return true;
  }

  /** Applies one decoded batch from `replica` at once (the simulator; tests). */
  apply(replica: string, batch: KvEventBatch): void {
    const run = this.start(replica, batch);
    if (run) while (!run.step(Infinity));
  }

  /** Applies a batch in slices that yield to the event loop, so a large batch never blocks it long. */
  async applySliced(replica: string, batch: KvEventBatch): Promise<void> {
    const run = this.start(replica, batch);
    if (!run) return;
    while (!run.step(SLICE_BLOCKS)) await new Promise((resolve) => setImmediate(resolve));
  }

  /**
   * Checks a batch's sequence number. Sequence numbers must increase; a batch
   * numbered 0 after others is a restarted publisher: the replica's blocks
   * are dropped and counting starts again.
   */
  private start(replica: string, batch: KvEventBatch): BatchRun | undefined {
    const entry = this.replicas.get(replica);
    if (!entry) {
      this.counters.unknownReplica++;
      return undefined;
    }
    if (batch.seq <= entry.lastSeq) {
      if (batch.seq !== 0n) {
        this.counters.outOfOrder++;
        return undefined;
      }
      this.clear(entry);
    } else if (entry.lastSeq >= 0n && batch.seq !== entry.lastSeq + 1n) {
      this.counters.gaps++;
    }
    entry.lastSeq = batch.seq;
    entry.lastEventAt = this.now();
    this.counters.batches++;
    return new BatchRun(this.counters, batch.events, (event, from, budget, state) => this.applyEvent(entry, event, from, budget, state));
  }

  /** Milliseconds since a lookup last found a block on some replica; Infinity when none ever did. */
  lastMatchAgeMs(): number {
    return this.now() - this.lookups.lastMatchAt;
  }

  /** Counts a frame that could not be decoded. */
  malformed(): void {
    this.counters.malformed++;
  }

  /** One event's blocks from `from`, at most `budget` of them; returns where it stopped (-1 when done). */
  private applyEvent(entry: ReplicaBlocks, event: KvEvent, from: number, budget: number, state: { parent: number | undefined }): number {
    switch (event.type) {
      case 'blocks-stored':
        return this.stored(entry, event, from, budget, state);
      case 'blocks-removed':
        return this.removed(entry, event, from, budget);
      case 'stored': {
        const end = Math.min(event.hashes.length, from + budget);
        for (let i = from; i < end; i++) this.add(entry, event.hashes[i]);
        return end < event.hashes.length ? end : -1;
      }
      case 'removed': {
        const end = Math.min(event.hashes.length, from + budget);
        for (let i = from; i < end; i++) this.release(entry, event.hashes[i]);
        return end < event.hashes.length ? end : -1;
      }
      case 'cleared':
        this.clear(entry);
        return -1;
      case 'invalid':
        this.counters.invalidEvents++;
        return -1;
      default:
        this.counters.unknownEvents++;
        return -1;
    }
  }

  private stored(entry: ReplicaBlocks, event: BlocksStored, from: number, budget: number, state: { parent: number | undefined }): number {
    const size = event.blockSize;
    if (from === 0) {
      if (!isMainTier(event.medium) || !this.isMainGroup(entry, event)) {
        this.counters.otherTier += event.hashes.length;
        return -1;
      }
      if (entry.blockSize !== size) {
        if (entry.blockSize !== 0) {
          // The engine restarted with another block size: nothing held is comparable any more.
          this.counters.blockSizeChanges++;
          this.clear(entry);
        }
        entry.blockSize = size;
        noteBlockSize(size);
      }
      const full = Math.min(event.hashes.length, Math.floor(event.tokenIds.length / size));
      this.counters.partialBlocks += event.hashes.length - full;
      if (event.parent === null) state.parent = rootKey(event.loraName ?? (event.loraId === null ? null : `lora-id:${event.loraId}`));
      else {
        state.parent = entry.engine.get(event.parent);
        if (state.parent === undefined) {
          this.counters.unknownParent += full;
          return -1;
        }
      }
    }
    const full = Math.min(event.hashes.length, Math.floor(event.tokenIds.length / size));
    const end = Math.min(full, from + budget);
    let parent = state.parent!;
    for (let i = from; i < end; i++) {
      const key = chainKey(parent, event.tokenIds, i * size, (i + 1) * size, event.extra?.[i] ?? 0);
      const engineHash = event.hashes[i];
      const previous = entry.engine.get(engineHash);
      if (previous !== key) {
        if (previous !== undefined) this.release(entry, previous);
        this.add(entry, key);
        entry.engine.set(engineHash, key);
      }
      parent = key;
    }
    state.parent = parent;
    return end < full ? end : -1;
  }

  private removed(entry: ReplicaBlocks, event: BlocksRemoved, from: number, budget: number): number {
    if (from === 0 && (!isMainTier(event.medium) || (event.groupIdx !== null && event.groupIdx !== (entry.mainGroup ?? 0)))) {
      this.counters.otherTier += event.hashes.length;
      return -1;
    }
    const end = Math.min(event.hashes.length, from + budget);
    for (let i = from; i < end; i++) {
      const key = entry.engine.get(event.hashes[i]);
      if (key === undefined) continue;
      entry.engine.delete(event.hashes[i]);
      this.release(entry, key);
    }
    return end < event.hashes.length ? end : -1;
  }

  /** Blocks of the full-attention group only: a hybrid model's sliding-window blocks do not hold a prefix. */
  private isMainGroup(entry: ReplicaBlocks, event: BlocksStored): boolean {
    if (event.specKind !== null) {
      if (event.specKind !== 'full_attention') return false;
      entry.mainGroup = event.groupIdx;
      return true;
    }
    return event.groupIdx === null || event.groupIdx === (entry.mainGroup ?? 0);
  }

  /** Adds one holder of `key`. */
  private add(entry: ReplicaBlocks, key: BlockKey): void {
    const held = entry.blocks.get(key);
    if (held !== undefined) {
      entry.blocks.set(key, held + 1);
      return;
    }
    if (entry.blocks.size >= this.maxBlocks || entry.engine.size >= this.maxBlocks) {
      // More blocks than any engine has: the feed is wrong; start over rather than grow.
      this.counters.overflows++;
      this.clear(entry);
    }
    entry.blocks.set(key, 1);
  }

  private release(entry: ReplicaBlocks, key: BlockKey): void {
    const held = entry.blocks.get(key);
    if (held === undefined) return;
    if (held > 1) entry.blocks.set(key, held - 1);
    else entry.blocks.delete(key);
  }

  private clear(entry: ReplicaBlocks): void {
    entry.blocks.clear();
    entry.engine.clear();
  }

  private counted(out: CachedPrefix[]): CachedPrefix[] {
    this.lookups.total++;
    for (const match of out) {
      if (match.blocks > 0) {
        this.lookups.matched++;
        this.lookups.lastMatchAt = this.now();
        break;
      }
    }
    return out;
  }

  /**
   * Each replica's run of held blocks from the first, for blocks named by the
   * router's prefix hashes (the simulator's engines). One lookup per block
   * held plus one, so a replica that misses early costs almost nothing.
   */
  longestPrefix(hashes: readonly number[]): CachedPrefix[] {
    const now = this.now();
    const out: CachedPrefix[] = [];
    for (const entry of this.replicas.values()) {
      const blocks = entry.blocks;
      let depth = 0;
      while (depth < hashes.length && blocks.has(hashes[depth])) depth++;
      out.push({ replica: entry.id, blocks: depth, ageMs: entry.lastEventAt === -Infinity ? Infinity : now - entry.lastEventAt });
    }
    return hashes.length > 0 ? this.counted(out) : out;
  }

  /**
   * Each replica's run of held blocks from the first, for a prompt's token
   * ids (exactly as the engine will see them): chunked by each replica's
   * block size and named as stored blocks are. Names are computed only as far
   * as some replica still matches.
   */
  longestPrefixOfTokens(tokenIds: ArrayLike<number>, adapter?: string): CachedPrefix[] {
    const now = this.now();
    const out: CachedPrefix[] = [];
    let keys: TokenBlockKeys | undefined;
    let blocksAsked = 0;
    for (const entry of this.replicas.values()) {
      let depth = 0;
      if (entry.blockSize > 0) {
        if (keys?.blockSize !== entry.blockSize) keys = new TokenBlockKeys(tokenIds, entry.blockSize, adapter, MAX_LOOKUP_BLOCKS);
        blocksAsked = Math.max(blocksAsked, keys.length);
        const blocks = entry.blocks;
        while (depth < keys.length && blocks.has(keys.keyAt(depth))) depth++;
      }
      out.push({
        replica: entry.id,
        blocks: depth,
        tokens: depth * entry.blockSize,
        ageMs: entry.lastEventAt === -Infinity ? Infinity : now - entry.lastEventAt,
      });
    }
    // A prompt shorter than a block asks nothing: it is not a lookup that failed.
    return blocksAsked > 0 ? this.counted(out) : out;
  }
}

/** The engine's own cache: "GPU", or no medium at all (vLLM before offload tiers; SGLang). */
function isMainTier(medium: string | null): boolean {
  return medium === null || medium === 'GPU';
}

/** A batch being applied: where it stopped, so that the next slice goes on from there. */
type EventStep = (event: KvEvent, from: number, budget: number, state: { parent: number | undefined }) => number;

class BatchRun {
  private event = 0;
  private offset = 0;
  private readonly state: { parent: number | undefined } = { parent: undefined };

  constructor(
    private readonly counters: KvIndexCounters,
    private readonly events: readonly KvEvent[],
    private readonly apply: EventStep,
  ) {}

  /** Applies up to `budget` block operations; true when the batch is done. */
  step(budget: number): boolean {
    const counters = this.counters;
    while (this.event < this.events.length) {
      const event = this.events[this.event];
      const from = this.offset;
      const stopped = this.apply(event, from, budget, this.state);
      if (stopped >= 0) {
        this.offset = stopped;
        return false;
      }
      counters.events++;
      this.event++;
      this.offset = 0;
      if (budget !== Infinity) {
        budget -= 1 + blocksOf(event) - from;
        if (budget <= 0) return this.event >= this.events.length;
      }
    }
    return true;
  }
}

function blocksOf(event: KvEvent): number {
  return 'hashes' in event ? event.hashes.length : 0;
}
