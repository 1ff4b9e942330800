// Which replica holds which KV blocks: the engines' KV cache events (vLLM's
// BlockStored / BlockRemoved / AllBlocksCleared) applied to one set of block
// hashes per replica. Strategies read it through the SDK (`ctx.kvIndex`). Every
// router subscribes to every engine, so all routers' indexes converge on the
// engines' truth. Bounded: each replica holds at most `maxBlocksPerReplica`
// blocks here (an engine reporting more is reset, counted), and a batch that
// breaks the sequence is dropped, counted, never thrown.
import type { CachedPrefix, KvIndexView } from '../../sdk/index.ts';
import type { KvEventBatch } from './kv-events.ts';

/** A block's key: an integer hash as a number, anything else (vLLM's bytes hashes) as a string. */
export type BlockKey = number | string;

export interface KvIndexCounters {
  batches: number;
  events: number;
  /** Frames that were not a KV event batch (wrong frame count, bad msgpack, wrong shape). */
  malformed: number;
  /** Batches whose sequence number was not after the last one (duplicates, reordering): dropped. */
  outOfOrder: number;
  /** Batches after a gap in sequence numbers: applied, but some events were missed. */
  gaps: number;
  /** Events of a kind the index does not know: skipped. */
  unknownEvents: number;
  /** Batches from a replica the policy does not (or no longer) name: dropped. */
  unknownReplica: number;
  /** Replicas reset for holding more blocks than the bound. */
  overflows: number;
}

class ReplicaBlocks {
  readonly blocks = new Set<BlockKey>();
  lastSeq = -1n;
  lastEventAt = -Infinity;
  constructor(readonly id: string) {}
}

export interface KvIndexOptions {
  readonly now: () => number;
  readonly maxBlocksPerReplica?: number;
}

export class KvIndex implements KvIndexView {
  readonly counters: KvIndexCounters = { batches: 0, events: 0, malformed: 0, outOfOrder: 0, gaps: 0, unknownEvents: 0, unknownReplica: 0, overflows: 0 };
  private readonly now: () => number;
  private readonly maxBlocks: number;
  private readonly replicas = new Map<string, ReplicaBlocks>();

  constructor(options: KvIndexOptions) {
    this.now = options.now;
    this.maxBlocks = options.maxBlocksPerReplica ?? 1 << 20;
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

  /**
   * Applies one decoded batch from `replica`. Sequence numbers must increase;
   * a batch numbered 0 after others is a restarted publisher: the replica's
   * blocks are dropped and counting starts again.
   */
  apply(replica: string, batch: KvEventBatch): void {
    const entry = this.replicas.get(replica);
    if (!entry) {
      this.counters.unknownReplica++;
      return;
    }
    if (batch.seq <= entry.lastSeq) {
      if (batch.seq !== 0n) {
        this.counters.outOfOrder++;
        return;
      }
      this.clear(entry);
    } else if (entry.lastSeq >= 0n && batch.seq !== entry.lastSeq + 1n) {
      this.counters.gaps++;
    }
    entry.lastSeq = batch.seq;
    entry.lastEventAt = this.now();
    this.counters.batches++;
    for (const event of batch.events) {
      this.counters.events++;
      switch (event.type) {
        case 'stored':
          for (const key of event.hashes) this.add(entry, key);
          break;
        case 'removed':
          for (const key of event.hashes) this.remove(entry, key);
          break;
        case 'cleared':
          this.clear(entry);
          break;
        default:
          this.counters.unknownEvents++;
      }
    }
  }

  /** Counts a frame that could not be decoded. */
  malformed(): void {
    this.counters.malformed++;
  }

  private add(entry: ReplicaBlocks, key: BlockKey): void {
    if (entry.blocks.has(key)) return;
    if (entry.blocks.size >= this.maxBlocks) {
      // More blocks than any engine has: the feed is wrong; start over rather than grow.
      this.counters.overflows++;
      this.clear(entry);
    }
    entry.blocks.add(key);
  }

  private remove(entry: ReplicaBlocks, key: BlockKey): void {
    entry.blocks.delete(key);
  }

  private clear(entry: ReplicaBlocks): void {
    entry.blocks.clear();
  }

  /**
   * Each replica's run of held blocks from the first: one set lookup per
   * block held plus one, so a replica that misses early costs almost nothing
   * (a prompt is at most the router's prefix_max_blocks long).
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
    return out;
  }
}
