// The previous prefix-affinity, its memory a Map of stamped entries (kept as
// the reference test/plugins/prefix-memory.test.ts checks the new one against:
// the same answers to every pick).
//
// Prefix affinity (docs/policies.md, decision 3): send a prompt to a
// replica that recently served the longest shared prefix, whose cache likely
// still holds it, unless that replica's KV usage is past the release threshold
// (or, with token_release_threshold, its prefill in flight: tokenLoad).
import { candidatePositions, type Candidate, type StrategyDefinition } from '../../sdk/index.ts';

interface Config {
  release_threshold: number;
  /** Release also when the replica's tokenLoad (prefill tokens in flight, 0..1) reaches this; null: never. */
  token_release_threshold?: number | null;
  /** Most prefix blocks remembered (LRU); memory stays bounded. */
  max_entries: number;
  /** Matches shorter than this many blocks don't count as warm. */
  min_match_blocks: number;
}

/**
 * A block's holders are capped: a block every replica holds (a popular system
 * prompt in a large pool) tells routing nothing more past a few of them, and
 * an uncapped list made each pick and each onRouted grow with the pool.
 */
const MAX_HOLDERS = 16;

/**
 * The replicas that last served one prefix block, as numbers (see Replicas),
 * most recent last and at most MAX_HOLDERS, and when the block was last used.
 */
interface Holders {
  readonly replicas: number[];
  /** Tick of the block's last use: the LRU order, kept without reordering the Map. */
  usedAt: number;
}

/**
 * Replica ids as small numbers: a pick reads up to MAX_HOLDERS holders for
 * each of a prompt's blocks, and array slots indexed by number cost a fraction
 * of what a Map keyed by id string does. Ids come from the router's policy,
 * so there are few; past MAX_REPLICA_NUMBERS (ids accumulated over reloads)
 * the memory starts afresh.
 */
const MAX_REPLICA_NUMBERS = 65_536;

class Replicas {
  readonly ids: string[] = [];
  private readonly numbers = new Map<string, number>();

  numberOf(id: string): number {
    let n = this.numbers.get(id);
    if (n === undefined) {
      n = this.ids.length;
      this.ids.push(id);
      this.numbers.set(id, n);
    }
    return n;
  }

  get full(): boolean {
    return this.ids.length >= MAX_REPLICA_NUMBERS;
  }
}

interface State {
  /** Prefix block hash (as a signed 32-bit integer: V8 keys those fastest) → its holders. */
  seen: Map<number, Holders>;
  replicas: Replicas;
  /** Ticks once per block use; carried over so ages stay comparable. */
  clock: number;
}

/**
 * Drops the least recently used entries down to 90% of the limit. Entries are
 * stamped on use rather than moved to the back of the Map: deleting and
 * re-inserting the hot blocks of every request leaves V8's Map full of
 * deleted slots, which made each request's upkeep grow with the memory's size.
 * Stamps are unique, so the cut-off stamp evicts exactly the oldest entries.
 */
function evictLeastRecentlyUsed(seen: Map<number, Holders>, maxEntries: number): void {
  const excess = seen.size - Math.floor(maxEntries * 0.9);
  if (excess <= 0) return;
  const stamps = new Float64Array(seen.size);
  let i = 0;
  for (const holders of seen.values()) stamps[i++] = holders.usedAt;
  const cutoff = stamps.sort()[excess - 1];
  for (const [hash, holders] of seen) if (holders.usedAt <= cutoff) seen.delete(hash);
}

/** Moves `replica` to the most recent end of `replicas`, dropping the oldest past the cap. */
function remember(replicas: number[], replica: number): void {
  const at = replicas.indexOf(replica);
  if (at === replicas.length - 1) return;
  if (at >= 0) replicas.splice(at, 1);
  else if (replicas.length >= MAX_HOLDERS) replicas.shift();
  replicas.push(replica);
}

export default {
  name: 'prefix-affinity',
  version: '1.0.0',
  sdk: '^1.2',
  description: 'Longest-prefix match over a bounded memory of which replica saw which prompt blocks.',
  configSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      release_threshold: { type: 'number', minimum: 0, maximum: 1, default: 0.85 },
      token_release_threshold: { type: ['number', 'null'], minimum: 0, maximum: 1, default: null },
      max_entries: { type: 'integer', minimum: 1, default: 200000 },
      min_match_blocks: { type: 'integer', minimum: 1, default: 1 },
    },
  },
  create(config, ctx) {
    const previous = ctx.previousState as Partial<State> | undefined;
    const known = previous?.seen instanceof Map && previous.replicas instanceof Replicas && typeof previous.clock === 'number';
    let seen: Map<number, Holders> = known ? previous.seen! : new Map();
    let replicas = known ? previous.replicas! : new Replicas();
    let clock = known ? previous.clock! : 0;
    // Per pick: each holder's deepest block, valid where stamped with this pick's number.
    const depthOf: number[] = [];
    const stampOf: number[] = [];
    let pickNumber = 0;

    return {
      pick(request, candidates) {
        const hashes = request.prefixHashes;
        if (hashes.length === 0) return { pass: true, reason: 'prompt shorter than one block' };
        // Deepest block each replica is known to hold.
        const stamp = ++pickNumber;
        const held: number[] = [];
        for (let i = 0; i < hashes.length; i++) {
          const holders = seen.get(hashes[i] | 0);
          if (!holders) break;
          for (const n of holders.replicas) {
            if (stampOf[n] !== stamp) {
              stampOf[n] = stamp;
              held.push(n);
            }
            depthOf[n] = i + 1;
          }
        }
        // The warm candidates, found through the remembered replicas (never more
        // than a few per block) rather than by walking the pool, in pool order.
        const positions = candidatePositions(candidates);
        const warm: { at: number; d: number }[] = [];
        for (const n of held) {
          const d = depthOf[n];
          const at = d >= config.min_match_blocks ? positions.get(replicas.ids[n]) : undefined;
          if (at !== undefined) warm.push({ at, d });
        }
        warm.sort((a, b) => a.at - b.at);
        let best: Candidate | undefined;
        let bestDepth = 0;
        const alternatives = [];
        for (const { at, d } of warm) {
          const candidate = candidates[at];
          const kv = candidate.signals.kvUsage;
          if (kv >= config.release_threshold) {
            alternatives.push({ replica: candidate.id, score: d, note: `released: kv ${kv.toFixed(2)}` });
            continue;
          }
          const tokens = candidate.signals.tokenLoad ?? 0;
          if (config.token_release_threshold != null && tokens >= config.token_release_threshold) {
            alternatives.push({ replica: candidate.id, score: d, note: `released: prefill load ${tokens.toFixed(2)}` });
            continue;
          }
          alternatives.push({ replica: candidate.id, score: d, note: `kv ${kv.toFixed(2)}` });
          if (!best || d > bestDepth || (d === bestDepth && kv < best.signals.kvUsage)) {
            best = candidate;
            bestDepth = d;
          }
        }
        if (!best) {
          return { pass: true, reason: alternatives.length ? 'every warm replica is past the release threshold' : 'no warm replica' };
        }
        return {
          replica: best.id,
          reason: `holds ${bestDepth} of ${hashes.length} prefix blocks (kv ${best.signals.kvUsage.toFixed(2)})`,
          alternatives,
        };
      },
      onRouted(request, replica) {
        if (replicas.full) {
          seen = new Map();
          replicas = new Replicas();
        }
        const n = replicas.numberOf(replica);
        for (const hash of request.prefixHashes) {
          const key = hash | 0;
          const holders = seen.get(key);
          if (holders) {
            holders.usedAt = ++clock;
            remember(holders.replicas, n);
          } else {
            seen.set(key, { replicas: [n], usedAt: ++clock });
          }
        }
        if (seen.size > config.max_entries) evictLeastRecentlyUsed(seen, config.max_entries);
      },
      exportState(): State {
        return { seen, replicas, clock };
      },
      dispose() {
        // The memory may live on in a successor (exportState); nothing else to free.
      },
    };
  },
} satisfies StrategyDefinition<Config>;
