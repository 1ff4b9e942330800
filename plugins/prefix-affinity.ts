// Prefix affinity (docs/policies.md, decision 3): send a prompt to a
// replica that recently served the longest shared prefix, whose cache likely
// still holds it, unless that replica's KV usage is past the release threshold.
import { candidatePositions, type Candidate, type StrategyDefinition } from '../sdk/index.ts';

interface Config {
  release_threshold: number;
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

/** The replicas that last served one prefix block (most recent last, at most MAX_HOLDERS), and when the block was last used. */
interface Holders {
  readonly replicas: string[];
  /** Tick of the block's last use: the LRU order, kept without reordering the Map. */
  usedAt: number;
}

interface State {
  /** Prefix block hash → its holders. */
  seen: Map<number, Holders>;
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
function remember(replicas: string[], replica: string): void {
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
      max_entries: { type: 'integer', minimum: 1, default: 200000 },
      min_match_blocks: { type: 'integer', minimum: 1, default: 1 },
    },
  },
  create(config, ctx) {
    const previous = ctx.previousState as Partial<State> | undefined;
    const known = previous?.seen instanceof Map && typeof previous.clock === 'number';
    const seen: Map<number, Holders> = known ? previous.seen! : new Map();
    let clock = known ? previous.clock! : 0;

    return {
      pick(request, candidates) {
        const hashes = request.prefixHashes;
        if (hashes.length === 0) return { pass: true, reason: 'prompt shorter than one block' };
        // Deepest block each replica is known to hold.
        const depth = new Map<string, number>();
        for (let i = 0; i < hashes.length; i++) {
          const holders = seen.get(hashes[i]);
          if (!holders) break;
          for (const id of holders.replicas) depth.set(id, i + 1);
        }
        // The warm candidates, found through the remembered ids (never more than a
        // few per block) rather than by walking the pool, and taken in pool order.
        const positions = candidatePositions(candidates);
        const warm: number[] = [];
        for (const [id, d] of depth) {
          const at = d >= config.min_match_blocks ? positions.get(id) : undefined;
          if (at !== undefined) warm.push(at);
        }
        warm.sort((a, b) => a - b);
        let best: Candidate | undefined;
        let bestDepth = 0;
        const alternatives = [];
        for (const at of warm) {
          const candidate = candidates[at];
          const d = depth.get(candidate.id)!;
          const kv = candidate.signals.kvUsage;
          if (kv >= config.release_threshold) {
            alternatives.push({ replica: candidate.id, score: d, note: `released: kv ${kv.toFixed(2)}` });
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
        for (const hash of request.prefixHashes) {
          const holders = seen.get(hash);
          if (holders) {
            holders.usedAt = ++clock;
            remember(holders.replicas, replica);
          } else {
            seen.set(hash, { replicas: [replica], usedAt: ++clock });
          }
        }
        if (seen.size > config.max_entries) evictLeastRecentlyUsed(seen, config.max_entries);
      },
      exportState(): State {
        return { seen, clock };
      },
      dispose() {
        // The map may live on in a successor (exportState); nothing else to free.
      },
    };
  },
} satisfies StrategyDefinition<Config>;
