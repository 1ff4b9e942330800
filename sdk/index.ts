// @switchyard/sdk: everything a replica-selection strategy may use.
export * from './types.ts';
export { candidatePositions } from './candidates.ts';
export { defineStrategy } from './define.ts';
export { formatPair } from './format.ts';
export { hashString, mixHashes, unitInterval, rendezvousOrder, rendezvousOwner, boundedLoadOwner } from './hashing.ts';
export { DEFAULT_LOAD_SCORE_WEIGHTS, loadScore, leastLoaded } from './load-score.ts';
export { prefixHashes, prefixSeed, chainBlockHashes, DEFAULT_PREFIX_BLOCK_CHARS, DEFAULT_PREFIX_MAX_BLOCKS } from './prefix.ts';
export { seededRandom, sampleTwo } from './random.ts';
