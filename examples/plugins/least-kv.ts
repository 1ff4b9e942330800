// least-kv: an example third-party strategy (docs/plugins.md walks through it).
//
// Picks the candidate with the most free KV cache. Scraped KV usage lags by
// up to a scrape interval, and every router that reads the same number sends
// its requests to the same "emptiest" replica (herding). So the estimate adds
// what this router sent to each replica since that replica's signals were
// scraped: a request it just sent there counts before the scrape shows it.
//
// The file needs no runtime import: the default export is a plain object,
// and `import type` disappears when the router compiles it. Outside this
// repository, import the types from '@switchyard/sdk' instead.
import type { Candidate, StrategyDefinition } from '../../sdk/index.ts';

interface Config {
  /** KV fraction one request is assumed to take until a scrape shows it. */
  per_request_kv: number;
  /** Pass to the next strategy when even the best estimate is this full. */
  max_kv: number;
}

/** What a successor instance takes over on a reload; tagged, so it can tell an older shape. */
interface State {
  readonly kind: 'least-kv/1';
  /** Replica id → when this router sent it requests (ms, newest last), at most KEEP per replica. */
  readonly sent: Map<string, number[]>;
}

const KEEP = 64;

export default {
  name: 'least-kv',
  version: '1.0.0',
  sdk: '^1',
  description: 'Most free KV cache, counting requests sent since the last scrape.',
  configSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      per_request_kv: { type: 'number', minimum: 0, maximum: 1, default: 0.01 },
      max_kv: { type: 'number', minimum: 0, maximum: 1, default: 0.9 },
    },
  },
  create(config, ctx) {
    const previous = ctx.previousState as Partial<State> | undefined;
    const sent: Map<string, number[]> = previous?.kind === 'least-kv/1' && previous.sent instanceof Map ? previous.sent : new Map();

    const estimate = (candidate: Candidate): number => {
      const times = sent.get(candidate.id);
      let unseen = 0;
      if (times) {
        // Sent after the signals were scraped: not in kvUsage yet.
        const scrapedAt = ctx.now() - candidate.signals.ageMs;
        for (let i = times.length - 1; i >= 0 && times[i] > scrapedAt; i--) unseen++;
      }
      return candidate.signals.kvUsage + unseen * config.per_request_kv;
    };

    return {
      pick(_request, candidates) {
        if (candidates.length === 0) return { pass: true, reason: 'no candidates' };
        let best: Candidate | undefined;
        let bestKv = Infinity;
        const alternatives = [];
        for (const candidate of candidates) {
          const kv = estimate(candidate);
          alternatives.push({ replica: candidate.id, score: kv, note: `kv ${candidate.signals.kvUsage.toFixed(2)} scraped, ${kv.toFixed(2)} estimated` });
          if (kv < bestKv) {
            best = candidate;
            bestKv = kv;
          }
        }
        if (bestKv >= config.max_kv) return { pass: true, reason: `every candidate is at ${config.max_kv} KV or more (estimated)` };
        return { replica: best!.id, reason: `most free KV cache (${bestKv.toFixed(2)} estimated)`, alternatives };
      },
      onRouted(_request, replica) {
        let times = sent.get(replica);
        if (!times) sent.set(replica, (times = []));
        times.push(ctx.now());
        if (times.length > KEEP) times.splice(0, times.length - KEEP);
      },
      exportState(): State {
        return { kind: 'least-kv/1', sent };
      },
      dispose() {
        // The map lives on in the successor (exportState): nothing else to release.
      },
    };
  },
} satisfies StrategyDefinition<Config>;
