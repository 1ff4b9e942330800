import type { Candidate, LoadScoreWeights } from './types.ts';

/** The default weights: KV usage dominates (docs/design.md, "The plugin contract"). */
export const DEFAULT_LOAD_SCORE_WEIGHTS: LoadScoreWeights = { kvUsage: 0.6, queue: 0.3, running: 0.1 };

/**
 * The load score, lower is better:
 * w.kv·kvUsage + w.queue·queueDepth/maxQueue + w.running·running/maxBatch
 * (+ w.tokenLoad·tokenLoad, when the pool weighs prefill in flight).
 */
export function loadScore(candidate: Candidate, weights: LoadScoreWeights = DEFAULT_LOAD_SCORE_WEIGHTS): number {
  const { signals, capacity } = candidate;
  return (
    weights.kvUsage * signals.kvUsage +
    weights.queue * (signals.queueDepth / Math.max(1, capacity.maxQueue)) +
    weights.running * (signals.running / Math.max(1, capacity.maxBatch)) +
    (weights.tokenLoad ? weights.tokenLoad * (signals.tokenLoad ?? 0) : 0)
  );
}

/** The candidate with the lowest load score (first on ties), with every score for the trace. */
export function leastLoaded(
  candidates: readonly Candidate[],
  weights: LoadScoreWeights = DEFAULT_LOAD_SCORE_WEIGHTS,
): { best: Candidate | undefined; scores: { replica: string; score: number }[] } {
  let best: Candidate | undefined;
  let bestScore = Infinity;
  const scores: { replica: string; score: number }[] = [];
  for (const candidate of candidates) {
    const score = loadScore(candidate, weights);
    scores.push({ replica: candidate.id, score });
    if (score < bestScore) {
      best = candidate;
      bestScore = score;
    }
  }
  return { best, scores };
}
