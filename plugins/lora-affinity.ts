// LoRA-adapter affinity (docs/policies.md, decision 3): prefer a replica that
// already has the adapter loaded, and concentrate an adapter's requests there
// (fewer distinct adapters per batch, lower grouped-GEMM overhead). Otherwise
// the least-loaded replica with room for another adapter.
import { leastLoaded, type Candidate, type StrategyDefinition } from '../sdk/index.ts';

interface Config {
  /** How long a replica counts as holding an adapter this router sent it, before a scrape shows it. */
  memory_ms: number;
}

export default {
  name: 'lora-affinity',
  version: '1.0.0',
  sdk: '^1.2',
  description: 'Replicas with the adapter loaded first, then those with room for one more adapter.',
  configSchema: {
    type: 'object',
    additionalProperties: false,
    properties: { memory_ms: { type: 'number', minimum: 0, default: 10000 } },
  },
  create(config, ctx) {
    // adapter → replica → when this router last sent it there.
    const recent = new Map<string, Map<string, number>>();

    return {
      pick(request, candidates) {
        const adapter = request.adapter;
        if (!adapter) return { pass: true, reason: 'no adapter' };
        // Looked up once, not once per candidate: this walks the whole pool.
        const sent = recent.get(adapter);
        const since = ctx.now() - config.memory_ms;
        const loaded: Candidate[] = [];
        for (const c of candidates) {
          if (c.signals.loadedAdapters.includes(adapter) || (sent !== undefined && (sent.get(c.id) ?? -Infinity) >= since)) loaded.push(c);
        }
        if (loaded.length) {
          const { best, scores } = leastLoaded(loaded, ctx.loadScoreWeights);
          return { replica: best!.id, reason: `${adapter} loaded on ${loaded.length} replica(s); least loaded`, alternatives: scores };
        }
        const room = candidates.filter((c) => c.signals.loadedAdapters.length < c.capacity.maxLoras);
        const { best, scores } = leastLoaded(room.length ? room : candidates, ctx.loadScoreWeights);
        if (!best) return { pass: true, reason: 'no candidates' };
        return {
          replica: best.id,
          reason: room.length ? `${adapter} not loaded; least loaded with room for an adapter` : `${adapter} not loaded and no replica has room; least loaded`,
          alternatives: scores,
        };
      },
      onRouted(request, replica) {
        if (!request.adapter) return;
        let byReplica = recent.get(request.adapter);
        if (!byReplica) recent.set(request.adapter, (byReplica = new Map()));
        byReplica.set(replica, ctx.now());
      },
      dispose() {
        recent.clear();
      },
    };
  },
} satisfies StrategyDefinition<Config>;
