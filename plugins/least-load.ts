// Baseline: the candidate with the lowest load score. Best with fresh
// signals; herds onto one replica when signals are stale.
import { leastLoaded, type StrategyDefinition } from '../sdk/index.ts';

export default {
  name: 'least-load',
  version: '1.0.0',
  sdk: '^1.2',
  description: 'The lowest load score of all candidates.',
  configSchema: { type: 'object', additionalProperties: false, properties: {} },
  create(_config, ctx) {
    return {
      pick(_request, candidates) {
        const { best, scores } = leastLoaded(candidates, ctx.loadScoreWeights);
        if (!best) return { pass: true, reason: 'no candidates' };
        return { replica: best.id, reason: 'lowest load score', alternatives: scores };
      },
    };
  },
} satisfies StrategyDefinition;
