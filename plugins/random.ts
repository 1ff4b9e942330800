// Baseline: a uniformly random candidate, from the seeded random source.
import type { StrategyDefinition } from '../sdk/index.ts';

export default {
  name: 'random',
  version: '1.0.0',
  sdk: '^1.2',
  description: 'A uniformly random candidate.',
  configSchema: { type: 'object', additionalProperties: false, properties: {} },
  create(_config, ctx) {
    return {
      pick(_request, candidates) {
        if (candidates.length === 0) return { pass: true, reason: 'no candidates' };
        return { replica: candidates[Math.floor(ctx.random() * candidates.length)].id, reason: 'random' };
      },
    };
  },
} satisfies StrategyDefinition;
