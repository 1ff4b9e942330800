// The duration of one engine step: the BLIS formula
//   β0 + β1·(uncached prefill tokens) + β2·(decode tokens)
// plus an attention term quadratic in context for prefills, and LoRA costs.
import type { EngineProfile } from './profiles.ts';

/** What one step computes; the engine model fills it while it builds a batch. */
export interface StepWork {
  prefillTokens: number;
  decodeTokens: number;
  /** Σ over prefill chunks of (chunk tokens × context each of them attends to). */
  attentionPairs: number;
  /** Distinct adapters in the batch. */
  distinctAdapters: number;
  /** Adapters this step had to load into a GPU slot. */
  adapterLoads: number;
}

export function stepTimeMs(profile: EngineProfile, work: StepWork): number {
  return (
    profile.stepBaseMs +
    profile.prefillTokenMs * work.prefillTokens +
    profile.decodeTokenMs * work.decodeTokens +
    profile.attentionPairMs * work.attentionPairs +
    profile.loraStepMs * work.distinctAdapters +
    profile.loraLoadMs * work.adapterLoads
  );
}

/**
 * Attention pairs of a prefill chunk of `tokens` tokens that starts after
 * `context` tokens already in the KV cache: each token attends to the context
 * and to the chunk's tokens before it.
 */
export function chunkAttentionPairs(context: number, tokens: number): number {
  return tokens * (context + tokens / 2);
}
