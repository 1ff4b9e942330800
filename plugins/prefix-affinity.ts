// Prefix affinity (reference text, section 4, step 2): send a prompt to a
// replica that recently served the longest shared prefix, whose cache likely
// still holds it, unless that replica's KV usage is past the release threshold.
import type { Candidate, StrategyDefinition } from '../sdk/index.ts';

interface Config {
  release_threshold: number;
  /** Most prefix blocks remembered (LRU); memory stays bounded. */
  max_entries: number;
  /** Matches shorter than this many blocks don't count as warm. */
  min_match_blocks: number;
}

interface State {
  /** Prefix block hash → replicas that served it, oldest entry first. */
  seen: Map<number, string[]>;
}

/**
 * Drops the least recently used entries down to 90% of the limit, through one
 * iterator: evicting one at a time from the front of a Map walks past every
 * slot deleted before, and costs milliseconds a request once the memory is full.
 */
function evictOldest(seen: Map<number, string[]>, maxEntries: number): void {
  let excess = seen.size - Math.floor(maxEntries * 0.9);
  for (const key of seen.keys()) {
    if (excess-- <= 0) break;
    seen.delete(key);
  }
}

export default {
  name: 'prefix-affinity',
  version: '1.0.0',
  sdk: '^1',
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
    const previous = ctx.previousState as State | undefined;
    const seen: Map<number, string[]> = previous?.seen instanceof Map ? previous.seen : new Map();

    return {
      pick(request, candidates) {
        const hashes = request.prefixHashes;
        if (hashes.length === 0) return { pass: true, reason: 'prompt shorter than one block' };
        // Deepest block each candidate is known to hold.
        const depth = new Map<string, number>();
        for (let i = 0; i < hashes.length; i++) {
          const holders = seen.get(hashes[i]);
          if (!holders) break;
          for (const id of holders) depth.set(id, i + 1);
        }
        let best: Candidate | undefined;
        let bestDepth = 0;
        const alternatives = [];
        for (const candidate of candidates) {
          const d = depth.get(candidate.id) ?? 0;
          if (d < config.min_match_blocks) continue;
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
            seen.delete(hash); // re-insert: most recently used last
            if (!holders.includes(replica)) holders.push(replica);
            seen.set(hash, holders);
          } else {
            seen.set(hash, [replica]);
          }
        }
        if (seen.size > config.max_entries) evictOldest(seen, config.max_entries);
      },
      exportState(): State {
        return { seen };
      },
      dispose() {
        // The map may live on in a successor (exportState); nothing else to free.
      },
    };
  },
} satisfies StrategyDefinition<Config>;
