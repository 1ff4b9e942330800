// Power of two choices (Mitzenmacher): sample two candidates at random and
// take the one with the lower load score. Nearly as good as least-loaded with
// fresh signals, and far more robust when signals are stale or several
// routers decide at once (no herding on one "least loaded" replica).
import { formatPair, loadScore, sampleTwo, type LoadScoreWeights, type StrategyDefinition } from '../sdk/index.ts';

interface Config {
  weights: Partial<{ kv_usage: number; queue: number; running: number }> | null;
}

export default {
  name: 'power-of-two',
  version: '1.0.0',
  sdk: '^1.2',
  description: 'Two random candidates; the lower load score wins.',
  configSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      weights: {
        type: ['object', 'null'],
        default: null,
        additionalProperties: false,
        properties: { kv_usage: { type: 'number' }, queue: { type: 'number' }, running: { type: 'number' } },
      },
    },
  },
  create(config, ctx) {
    const weights: LoadScoreWeights = {
      kvUsage: config.weights?.kv_usage ?? ctx.loadScoreWeights.kvUsage,
      queue: config.weights?.queue ?? ctx.loadScoreWeights.queue,
      running: config.weights?.running ?? ctx.loadScoreWeights.running,
    };
    return {
      pick(_request, candidates) {
        if (candidates.length === 0) return { pass: true, reason: 'no candidates' };
        const [i, j] = sampleTwo(candidates.length, ctx.random);
        const a = candidates[i];
        const b = candidates[j];
        const scoreA = loadScore(a, weights);
        const scoreB = loadScore(b, weights);
        const chosen = scoreB < scoreA ? b : a;
        const [low, high] = formatPair(Math.min(scoreA, scoreB), Math.max(scoreA, scoreB));
        return {
          replica: chosen.id,
          reason: a === b ? 'only candidate' : `lower load score of two sampled (${low} vs ${high})`,
          alternatives:
            a === b
              ? [{ replica: a.id, score: scoreA }]
              : [
                  { replica: a.id, score: scoreA },
                  { replica: b.id, score: scoreB },
                ],
        };
      },
    };
  },
} satisfies StrategyDefinition<Config>;
