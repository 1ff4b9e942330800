// Turns the KV cache's range notifications into vLLM's block events:
// BlockStored (the blocks' hashes, their parent's hash, their token ids) and
// BlockRemoved (hashes). A block is named by the hash its prompt gives it
// (`PromptBlocks.hashes`); the cache evicts by (stream, block), so the
// recorder remembers the name of every block it reported until the block
// leaves (at most one entry per cached block). Blocks without a name are
// cached but not reported, as their removal is then.
import type { KvCacheListener } from './kv-cache.ts';
import type { BlockName, PromptBlocks } from './prompt-blocks.ts';

/** Blocks named `N`: numbers in the simulator (the router's hashes), vLLM's hashes in the emulator. */
export type KvBlockEvent<N extends BlockName = number> =
  | { readonly type: 'stored'; readonly hashes: N[]; readonly parent: N | null; readonly tokenIds: number[]; readonly adapter?: string }
  | { readonly type: 'removed'; readonly hashes: N[] }
  | { readonly type: 'cleared' };

/** (stream, block) as one number: streams are 32-bit, blocks fewer than 2^20 (16M tokens). */
function blockKey(stream: number, block: number): number {
  return (stream >>> 0) * 0x10_0000 + block;
}

export class KvEventRecorder<N extends BlockName = number> implements KvCacheListener {
  private readonly names = new Map<number, N>();

  constructor(private readonly emit: (event: KvBlockEvent<N>) => void) {}

  /** Blocks reported stored and not yet removed. */
  get size(): number {
    return this.names.size;
  }

  /** The hash reported for block `block` of `stream`, if it is cached and was reported. */
  nameOf(stream: number, block: number): N | undefined {
    return this.names.get(blockKey(stream, block));
  }

  stored(prompt: PromptBlocks, from: number, to: number): void {
    const hashes = prompt.hashes as ArrayLike<N> | undefined;
    if (hashes === undefined) return;
    const end = to < hashes.length ? to : hashes.length;
    if (end <= from) return;
    const { streams, ends } = prompt;
    let r = 0;
    while (ends[r] <= from) r++;
    const stored: N[] = [];
    const tokenIds: number[] = [];
    for (let j = from; j < end; j++) {
      if (j >= ends[r]) r++;
      this.names.set(blockKey(streams[r], j), hashes[j]);
      stored.push(hashes[j]);
      if (prompt.tokenIds) for (const id of prompt.tokenIds(j)) tokenIds.push(id);
    }
    this.emit({ type: 'stored', hashes: stored, parent: from > 0 ? hashes[from - 1] : null, tokenIds, adapter: prompt.adapter });
  }

  removed(stream: number, lo: number, hi: number): void {
    const removed: N[] = [];
    // Evicted from the last block down, as the cache does.
    for (let j = hi - 1; j >= lo; j--) {
      const key = blockKey(stream, j);
      const name = this.names.get(key);
      if (name === undefined) continue;
      this.names.delete(key);
      removed.push(name);
    }
    if (removed.length > 0) this.emit({ type: 'removed', hashes: removed });
  }
}
