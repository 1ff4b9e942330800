// Session affinity (docs/policies.md, decision 3): a conversation stays
// on the replica its id hashes to, so its growing prompt hits that replica's
// prefix cache. Released when that replica's KV usage reaches the threshold,
// so one popular conversation cannot overload a replica; or, with
// token_release_threshold, when its prefill in flight (tokenLoad) reaches it.
import { boundedLoadOwner, rendezvousOwner, type Candidate, type StrategyDefinition } from '../sdk/index.ts';

interface Config {
  release_threshold: number;
  /** Release also when the replica's tokenLoad (prefill tokens in flight, 0..1) reaches this; null: never. */
  token_release_threshold?: number | null;
  /** Consistent hashing with bounded loads: no replica above this × the mean engine load (running + waiting). */
  bounded_load: number | null;
}

const idOf = (c: Candidate) => c.id;
const MAX_REMEMBERED_REASONS = 65_536;
// The engine's own load (running + waiting, as scraped), not this router's
// in-flight count: every router sees the same engine, so every router bounds
// the same replicas and they keep agreeing on owners (docs/quotas.md, "Routers
// agree"). The candidate's signals never count less than this router's own.
const loadOf = (c: Candidate) => Math.max(c.signals.running + c.signals.queueDepth, c.signals.inFlight);

export default {
  name: 'session-affinity',
  version: '1.0.0',
  sdk: '^1.2',
  description: 'Consistent hash of the conversation id over the candidates, with a KV release valve.',
  configSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      release_threshold: { type: 'number', minimum: 0, maximum: 1, default: 0.85 },
      token_release_threshold: { type: ['number', 'null'], minimum: 0, maximum: 1, default: null },
      bounded_load: { type: ['number', 'null'], minimum: 1, default: null },
    },
  },
  create(config) {
    // Each owner's last reason and the kv it was written for: toFixed costs ~0.1 µs a pick, and a
    // replica's kv changes only on a scrape. Ids come from the policy; the bound is only a backstop.
    const said = new Map<string, { kv: number; reason: string }>();
    const reasonFor = (id: string, kv: number): string => {
      let last = said.get(id);
      if (last === undefined) {
        if (said.size >= MAX_REMEMBERED_REASONS) said.clear();
        said.set(id, (last = { kv: Number.NaN, reason: '' }));
      }
      if (!(last.kv === kv)) {
        last.kv = kv;
        last.reason = `conversation hashes to ${id} (kv ${kv.toFixed(2)} < ${config.release_threshold})`;
      }
      return last.reason;
    };
    return {
      pick(request, candidates) {
        if (!request.conversationId) return { pass: true, reason: 'no conversation id' };
        const key = request.conversationId;
        const owner =
          config.bounded_load == null ? rendezvousOwner(key, candidates, idOf) : boundedLoadOwner(key, candidates, idOf, loadOf, config.bounded_load).owner;
        if (!owner) return { pass: true, reason: 'no candidates' };
        const kv = owner.signals.kvUsage;
        if (kv >= config.release_threshold) {
          return { pass: true, reason: `released ${owner.id}: kv ${kv.toFixed(2)} >= ${config.release_threshold}` };
        }
        const tokens = owner.signals.tokenLoad ?? 0;
        if (config.token_release_threshold != null && tokens >= config.token_release_threshold) {
          return { pass: true, reason: `released ${owner.id}: prefill load ${tokens.toFixed(2)} >= ${config.token_release_threshold}` };
        }
        return { replica: owner.id, reason: reasonFor(owner.id, kv) };
      },
    };
  },
} satisfies StrategyDefinition<Config>;
