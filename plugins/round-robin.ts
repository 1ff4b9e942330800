// Baseline: candidates in turn. Blind to load and to caches: the reference
// text's "wrong on every axis", kept for comparison.
import type { StrategyDefinition } from '../sdk/index.ts';

export default {
  name: 'round-robin',
  version: '1.0.0',
  sdk: '^1.2',
  description: 'Each candidate in turn.',
  configSchema: { type: 'object', additionalProperties: false, properties: {} },
  create() {
    let next = 0;
    return {
      pick(_request, candidates) {
        if (candidates.length === 0) return { pass: true, reason: 'no candidates' };
        const chosen = candidates[next++ % candidates.length];
        if (next >= 1_000_000_000) next = 0;
        return { replica: chosen.id, reason: 'next in turn' };
      },
    };
  },
} satisfies StrategyDefinition;
