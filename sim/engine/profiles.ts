// Named hardware/model profiles for the engine model. The β coefficients are
// the published BLIS fits for vLLM 0.8 (docs/design.md, "Facts we rely on"); the
// attention term and the LoRA costs are our own estimates, chosen so that a
// 64k-token prefill on the 8B profile takes ~3.5 s, as measured on one H100.

export interface EngineProfile {
  readonly name: string;
  readonly description: string;
  /** Model name a replica of this profile serves by default. */
  readonly modelName: string;
  /** β0: fixed cost of one engine step, ms. */
  readonly stepBaseMs: number;
  /** β1: cost per uncached prefill token, ms. */
  readonly prefillTokenMs: number;
  /** β2: cost per decode token, ms. */
  readonly decodeTokenMs: number;
  /**
   * Cost per (prefill token × context token it attends to), ms. Zero at the
   * lengths BLIS was fitted on, it makes very long prefills super-linear.
   */
  readonly attentionPairMs: number;
  /** Tokens per KV block (vLLM's block_size). */
  readonly blockSize: number;
  /** KV blocks on the GPU (vLLM's num_gpu_blocks). */
  readonly numGpuBlocks: number;
  /** Largest running batch (max_num_seqs). */
  readonly maxNumSeqs: number;
  /** Token budget of one step (max_num_batched_tokens); long prefills are chunked to it. */
  readonly maxNumBatchedTokens: number;
  /** Longest prompt + output a request may have (max_model_len). */
  readonly maxModelLen: number;
  /** Adapters the GPU holds at once (max_loras). */
  readonly maxLoras: number;
  /** Stall of the whole step that first needs an adapter not in a GPU slot, ms. */
  readonly loraLoadMs: number;
  /** Grouped-GEMM overhead per distinct adapter in a step's batch, ms. */
  readonly loraStepMs: number;
}

const llama8bH100: EngineProfile = {
  name: 'llama-3.1-8b-h100',
  description: 'Llama-3.1-8B on one H100 (vLLM 0.8, BLIS fit)',
  modelName: 'meta-llama/Llama-3.1-8B-Instruct',
  stepBaseMs: 5.75,
  prefillTokenMs: 0.0173,
  decodeTokenMs: 0.006,
  attentionPairMs: 1.1e-6,
  blockSize: 16,
  numGpuBlocks: 29_205,
  maxNumSeqs: 256,
  maxNumBatchedTokens: 8192,
  maxModelLen: 131_072,
  maxLoras: 8,
  loraLoadMs: 25,
  loraStepMs: 0.25,
};

const llama70b4xH100: EngineProfile = {
  name: 'llama-3.3-70b-4xh100',
  description: 'Llama-3.3-70B on four H100s, tensor parallel (vLLM 0.8, BLIS fit)',
  modelName: 'meta-llama/Llama-3.3-70B-Instruct',
  stepBaseMs: 12.6,
  prefillTokenMs: 0.076,
  decodeTokenMs: 0.067,
  // 80 layers × 64 heads over 4 GPUs: ~1.25× the 8B model's attention work per GPU.
  attentionPairMs: 1.4e-6,
  blockSize: 16,
  numGpuBlocks: 128_273,
  maxNumSeqs: 256,
  maxNumBatchedTokens: 8192,
  maxModelLen: 131_072,
  maxLoras: 8,
  loraLoadMs: 60,
  loraStepMs: 0.5,
};

/** A replica small enough that tests can fill its KV cache with a handful of requests. */
const tiny: EngineProfile = {
  name: 'tiny',
  description: 'A toy replica for tests: 64 KV blocks, 4 sequences, 2 adapters',
  modelName: 'tiny-model',
  stepBaseMs: 5,
  prefillTokenMs: 0.02,
  decodeTokenMs: 0.01,
  attentionPairMs: 0,
  blockSize: 16,
  numGpuBlocks: 64,
  maxNumSeqs: 4,
  maxNumBatchedTokens: 256,
  maxModelLen: 1024,
  maxLoras: 2,
  loraLoadMs: 20,
  loraStepMs: 1,
};

export const PROFILES: Readonly<Record<string, EngineProfile>> = Object.freeze({
  [llama8bH100.name]: llama8bH100,
  [llama70b4xH100.name]: llama70b4xH100,
  [tiny.name]: tiny,
});

export const PROFILE_NAMES: readonly string[] = Object.keys(PROFILES);

/** The named profile; throws a one-line error naming the known ones. */
export function getProfile(name: string): EngineProfile {
  const profile = Object.hasOwn(PROFILES, name) ? PROFILES[name] : undefined;
  if (!profile) throw new Error(`unknown engine profile '${name}' (known: ${PROFILE_NAMES.join(', ')})`);
  return profile;
}

/**
 * Checks the invariants the engine model relies on: a lone request of
 * max_model_len tokens must fit in the KV cache (vLLM refuses to start
 * otherwise), so a request can always make progress once it runs alone.
 */
export function validateProfile(profile: EngineProfile): void {
  const positive: (keyof EngineProfile)[] = ['blockSize', 'numGpuBlocks', 'maxNumSeqs', 'maxNumBatchedTokens', 'maxModelLen'];
  for (const key of positive) {
    const value = profile[key];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
      throw new Error(`engine profile '${profile.name}': ${key} must be a positive integer`);
    }
  }
  if (!Number.isInteger(profile.maxLoras) || profile.maxLoras < 0) {
    throw new Error(`engine profile '${profile.name}': maxLoras must be a non-negative integer`);
  }
  for (const key of ['stepBaseMs', 'prefillTokenMs', 'decodeTokenMs', 'attentionPairMs', 'loraLoadMs', 'loraStepMs'] as const) {
    if (!(profile[key] >= 0)) throw new Error(`engine profile '${profile.name}': ${key} must be >= 0`);
  }
  if (profile.stepBaseMs <= 0) throw new Error(`engine profile '${profile.name}': stepBaseMs must be > 0`);
  if (profile.maxModelLen > profile.numGpuBlocks * profile.blockSize) {
    throw new Error(
      `engine profile '${profile.name}': maxModelLen ${profile.maxModelLen} exceeds the KV cache (${profile.numGpuBlocks} blocks of ${profile.blockSize})`,
    );
  }
}
