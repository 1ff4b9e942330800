// LoRA-adapter affinity (docs/policies.md, decision 3): prefer a replica that
// already has the adapter loaded, and concentrate an adapter's requests there
// (fewer distinct adapters per batch, lower grouped-GEMM overhead). Otherwise
// the least-loaded replica with room for another adapter.
import { adapterPositions } from '../sdk/candidates.ts';
import { candidatePositions, leastLoaded, type Candidate, type StrategyDefinition } from '../sdk/index.ts';

interface Config {
  /** How long a replica counts as holding an adapter this router sent it, before a scrape shows it. */
  memory_ms: number;
}

/**
 * The candidates, in their order, that report the adapter loaded or that
 * this router sent it to at or after `since`. Neither walks the pool: the
 * router keeps which candidates hold which adapter with its shared list, and
 * the replicas sent to are found by position.
 */
function withAdapter(candidates: readonly Candidate[], adapter: string, sent: ReadonlyMap<string, number> | undefined, since: number): Candidate[] {
  const held = adapterPositions(candidates, adapter);
  let positions: readonly number[] = held;
  if (sent !== undefined && sent.size > 0) {
    const index = candidatePositions(candidates);
    let merged: number[] | undefined;
    let seen: Set<number> | undefined;
    for (const [id, at] of sent) {
      const i = at >= since ? index.get(id) : undefined;
      if (i === undefined || (seen ??= new Set(held)).has(i)) continue;
      seen.add(i);
      (merged ??= [...held]).push(i);
    }
    if (merged !== undefined) positions = merged.sort((a, b) => a - b);
  }
  const loaded: Candidate[] = new Array(positions.length);
  for (let k = 0; k < positions.length; k++) loaded[k] = candidates[positions[k]];
  return loaded;
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
        const loaded = withAdapter(candidates, adapter, recent.get(adapter), ctx.now() - config.memory_ms);
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
