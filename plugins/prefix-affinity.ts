// Prefix affinity (docs/policies.md, decision 3): send a prompt to a
// replica that recently served the longest shared prefix, whose cache likely
// still holds it, unless that replica's KV usage is past the release threshold
// (or, with token_release_threshold, its prefill in flight: tokenLoad).
import { candidatePositions, type Candidate, type StrategyDefinition } from '../sdk/index.ts';
import { BlockMemory } from './block-memory.ts';

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
  /** Prefix block hash (as a signed 32-bit integer) → the replicas that last served it, in LRU order. */
  memory: BlockMemory;
  replicas: Replicas;
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
    const known = previous?.memory instanceof BlockMemory && previous.replicas instanceof Replicas;
    // The salt only places entries in the memory's table: the answers never depend on it.
    const newMemory = () => new BlockMemory((ctx.random() * 0x1_0000_0000) | 0);
    let memory = known ? previous.memory! : newMemory();
    let replicas = known ? previous.replicas! : new Replicas();
    // Per pick: each holder's deepest block, valid where stamped with this pick's number; the
    // holders met, and the warm candidates' positions and depths (reused: a pick allocates
    // only its answer).
    const depthOf: number[] = [];
    const stampOf: number[] = [];
    let pickNumber = 0;
    const held: number[] = [];
    const warmAt: number[] = [];
    const warmDepth: number[] = [];
    const warmNumber: number[] = [];
    // Each replica's last note, `kv 0.42`, and the kv it was written for: toFixed costs ~0.1 µs, and a
    // request with no conversation notes every warm replica (up to 16) though kv changes only on a scrape.
    const notedKv: number[] = [];
    const notes: string[] = [];
    const kvNote = (n: number, kv: number): string => {
      if (notedKv[n] !== kv) {
        notedKv[n] = kv;
        notes[n] = `kv ${kv.toFixed(2)}`;
      }
      return notes[n];
    };

    // Each replica's position in the kept candidate list, by replica number, where stamped with the
    // list's number: the router hands over the same frozen list until the pool changes, and an array
    // read costs less than the id's lookup in candidatePositions' map, for each warm replica of a pick.
    let kept: readonly Candidate[] | undefined;
    let keptNumber = 0;
    const keptAt: number[] = [];
    const keptStamp: number[] = [];

    // The blocks the last pick found (hashes[0 .. walkedDepth)) are fresh in the CPU's caches:
    // when that request is routed, only the rest need reading ahead.
    let walked: readonly number[] | undefined;
    let walkedDepth = 0;

    return {
      pick(request, candidates) {
        const hashes = request.prefixHashes;
        if (hashes.length === 0) return { pass: true, reason: 'prompt shorter than one block' };
        // Deepest block each replica is known to hold.
        const stamp = ++pickNumber;
        held.length = 0;
        const holders = memory.holderArray;
        let entry = -1;
        let i = 0;
        for (; i < hashes.length; i++) {
          entry = memory.findAfter(entry, hashes[i] | 0);
          if (entry < 0) break;
          // Its older holders (most blocks have none), then its newest.
          const first = memory.holdersStart(entry);
          const end = first + memory.holderCount(entry) - 1;
          for (let k = first; k <= end; k++) {
            const n = k < end ? holders[k] : memory.newestHolder(entry);
            if (stampOf[n] !== stamp) {
              stampOf[n] = stamp;
              held.push(n);
            }
            depthOf[n] = i + 1;
          }
        }
        walked = hashes;
        walkedDepth = i;
        // The warm candidates, found through the remembered replicas (never more
        // than a few per block) rather than by walking the pool, in pool order.
        if (candidates !== kept) {
          kept = Object.isFrozen(candidates) ? candidates : undefined;
          keptNumber++;
        }
        let positions: ReadonlyMap<string, number> | undefined;
        let warm = 0;
        for (let h = 0; h < held.length; h++) {
          const n = held[h];
          const d = depthOf[n];
          if (d < config.min_match_blocks) continue;
          let at: number;
          if (kept !== undefined && keptStamp[n] === keptNumber) at = keptAt[n];
          else {
            positions ??= candidatePositions(candidates);
            at = positions.get(replicas.ids[n]) ?? -1;
            if (kept !== undefined) {
              keptStamp[n] = keptNumber;
              keptAt[n] = at;
            }
          }
          if (at < 0) continue;
          // Insertion by position (a replica holds one place): they are few, at most a few per block.
          let k = warm++;
          for (; k > 0 && warmAt[k - 1] > at; k--) {
            warmAt[k] = warmAt[k - 1];
            warmDepth[k] = warmDepth[k - 1];
            warmNumber[k] = warmNumber[k - 1];
          }
          warmAt[k] = at;
          warmDepth[k] = d;
          warmNumber[k] = n;
        }
        let best: Candidate | undefined;
        let bestDepth = 0;
        const alternatives = [];
        for (let w = 0; w < warm; w++) {
          const d = warmDepth[w];
          const candidate = candidates[warmAt[w]];
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
          alternatives.push({ replica: candidate.id, score: d, note: kvNote(warmNumber[w], kv) });
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
          memory = newMemory();
          replicas = new Replicas();
          // The numbers name other replicas now.
          keptNumber++;
        }
        const n = replicas.numberOf(replica);
        const hashes = request.prefixHashes;
        memory.prefetch(hashes, hashes === walked ? walkedDepth : 0);
        walked = undefined;
        memory.touchAll(hashes, n);
        // Past the limit, the least recently used down to 90% of it, in one go.
        if (memory.size > config.max_entries) memory.evictOldest(memory.size - Math.floor(config.max_entries * 0.9));
      },
      exportState(): State {
        return { memory, replicas };
      },
      dispose() {
        // The memory may live on in a successor (exportState); nothing else to free.
      },
    };
  },
} satisfies StrategyDefinition<Config>;
