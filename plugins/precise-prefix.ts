// Precise prefix routing: send a prompt to the replica whose KV cache holds
// the longest part of it, as the engines themselves report it (KV cache
// events, `ctx.kvIndex`), instead of guessing from what this router sent.
// Every router sees the same engines' truth, so three routers place a
// conversation's first turn where its system prompt is cached and keep it
// where its answers are, as one router would. Release valve: a replica past
// the KV threshold, or above `bounded_load` × the mean in-flight count, is
// skipped. A candidate whose events are missing or stale (requests were
// routed to it and no event came for `max_event_age_ms`) is set aside and the
// others decide; when none of them holds the prompt, or every candidate is
// set aside, it passes: the next strategy in the chain (approximate prefix
// affinity) decides.
// With the prompt's token ids (a tokenizer configured for the model) the
// lookup is by token content, which matches a real vLLM or SGLang; without
// them, by the router's prefix hashes, which only the simulator's engines use.
import { loadScore, type Alternative, type Candidate, type CachedPrefix, type StrategyDefinition } from '../sdk/index.ts';

/** A replica's entry: a scan, as a pool has a handful of replicas and a Map per request would cost more. */
function matchOf(matches: readonly CachedPrefix[], replica: string): CachedPrefix | undefined {
  for (let i = 0; i < matches.length; i++) if (matches[i].replica === replica) return matches[i];
  return undefined;
}

interface Config {
  release_threshold: number;
  /** Skip a replica whose in-flight count exceeds this × the candidates' mean (+1); null: no bound. */
  bounded_load: number | null;
  /** Matches shorter than this many blocks leave the choice to the next strategy. */
  min_match_blocks: number;
  /** A replica that got requests this long ago and has sent no event since is stale. */
  max_event_age_ms: number;
}

export default {
  name: 'precise-prefix',
  version: '1.2.0',
  sdk: '^1.1',
  description: 'Longest prefix each replica actually holds, from the engines’ KV cache events; falls back when events are stale.',
  configSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      release_threshold: { type: 'number', minimum: 0, maximum: 1, default: 0.85 },
      bounded_load: { type: ['number', 'null'], minimum: 1, default: 2 },
      min_match_blocks: { type: 'integer', minimum: 1, default: 1 },
      max_event_age_ms: { type: 'number', exclusiveMinimum: 0, default: 5000 },
    },
  },
  create(config, ctx) {
    const index = ctx.kvIndex;
    /** Per replica: when this router first sent it a request that no event has answered yet. */
    const unconfirmedSince = new Map<string, number>();

    /** Why a replica's events cannot be trusted now, or undefined when they can. */
    const staleness = (id: string, match: CachedPrefix | undefined, now: number): string | undefined => {
      if (match === undefined) return `${id} publishes no KV events`;
      const since = unconfirmedSince.get(id);
      if (since === undefined) return undefined;
      if (now - match.ageMs > since) {
        unconfirmedSince.delete(id);
        return undefined;
      }
      return now - since > config.max_event_age_ms ? `${id}: no KV event for ${Math.round(now - since)} ms after a request` : undefined;
    };

    return {
      pick(request, candidates) {
        if (index === undefined) return { pass: true, reason: 'this router has no KV event index' };
        const tokenIds = index.longestPrefixOfTokens ? request.promptTokenIds : undefined;
        const hashes = tokenIds === undefined ? request.prefixHashes : undefined;
        if (hashes?.length === 0) return { pass: true, reason: 'prompt shorter than one block' };
        const matches = tokenIds !== undefined ? index.longestPrefixOfTokens!(tokenIds, request.adapter) : index.longestPrefix(hashes!);
        const now = ctx.now();
        let total = 0;
        // A replica whose events cannot be trusted now is set aside, not the
        // whole strategy: the others' events still say where the prompt is.
        let untrusted: string[] | undefined;
        let setAside: Set<string> | undefined;
        for (const candidate of candidates) {
          const stale = staleness(candidate.id, matchOf(matches, candidate.id), now);
          if (stale !== undefined) {
            (untrusted ??= []).push(stale);
            (setAside ??= new Set()).add(candidate.id);
          }
          total += candidate.signals.inFlight;
        }
        if (untrusted !== undefined && untrusted.length === candidates.length) return { pass: true, reason: `${untrusted[0]}: falling back` };
        const bound = config.bounded_load == null ? Infinity : Math.ceil(((total + 1) / candidates.length) * config.bounded_load);
        let best: Candidate | undefined;
        let bestBlocks = 0;
        let bestLoad = Infinity;
        const alternatives: Alternative[] = [];
        for (const candidate of candidates) {
          const match = matchOf(matches, candidate.id);
          if (match === undefined || setAside?.has(candidate.id)) {
            alternatives.push({ replica: candidate.id, score: 0, note: 'set aside: its KV events are missing or stale' });
            continue;
          }
          // Tokens when known: replicas of one pool may cache in blocks of different sizes.
          const blocks = match.tokens ?? match.blocks;
          const { kvUsage, inFlight } = candidate.signals;
          if (kvUsage >= config.release_threshold) {
            alternatives.push({ replica: candidate.id, score: blocks, note: `released: kv ${kvUsage.toFixed(2)}` });
            continue;
          }
          if (inFlight + 1 > bound) {
            alternatives.push({ replica: candidate.id, score: blocks, note: `released: ${inFlight} in flight > ${bound}` });
            continue;
          }
          const load = loadScore(candidate, ctx.loadScoreWeights) + inFlight / Math.max(1, candidate.capacity.maxBatch);
          alternatives.push({ replica: candidate.id, score: blocks, note: `load ${load.toFixed(2)}` });
          if (blocks > bestBlocks || (blocks === bestBlocks && load < bestLoad)) {
            best = candidate;
            bestBlocks = blocks;
            bestLoad = load;
          }
        }
        const bestMatch = best && matchOf(matches, best.id)!;
        if (best === undefined || bestMatch!.blocks < config.min_match_blocks) {
          let why = best === undefined ? 'every replica is past the release valve' : `no replica holds ${config.min_match_blocks}+ blocks of the prompt`;
          // Engines that publish token ids are matched by them only: say why a lookup by the router's prefix hashes found nothing.
          if (tokenIds === undefined && index.longestPrefixOfTokens && best !== undefined)
            why +=
              ' (its token ids are not known: the model has no tokenizer, or the count fell back to the estimate; see switchyard_prompt_token_counts_total)';
          return { pass: true, reason: untrusted === undefined ? why : `${why} (set aside: ${untrusted.join('; ')})` };
        }
        const reason =
          tokenIds !== undefined
            ? `holds ${bestMatch!.tokens ?? 0} of ${tokenIds.length} prompt tokens (KV events)`
            : `holds ${bestBlocks} of ${hashes!.length} prefix blocks (KV events)`;
        return { replica: best.id, reason, alternatives };
      },
      onRouted(request, replica) {
        if (!unconfirmedSince.has(replica) && ((request.promptTokenIds?.length ?? 0) > 0 || request.prefixHashes.length > 0))
          unconfirmedSince.set(replica, ctx.now());
      },
    };
  },
} satisfies StrategyDefinition<Config>;
