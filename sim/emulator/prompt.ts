// How the emulator turns a request body into what the engine model needs:
// the rendered prompt, its token count (~4 characters a token) and the
// chained block hashes of its prefix. Rendering and hashing are the router's
// own (core/facts/prompt.ts, sdk/prefix.ts), so the emulated cache agrees
// with what a prefix-aware router predicts.
import { prefixHashes, prefixSeed } from '../../sdk/prefix.ts';
import { blocksOfHashes, type PromptBlocks } from '../engine/prompt-blocks.ts';

export { contentText, renderMessages as renderChat } from '../../core/facts/prompt.ts';

export const CHARS_PER_TOKEN = 4;

export function estimateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / CHARS_PER_TOKEN));
}

/** The prompt's blocks for the engine model: one run per chained block hash. */
export function promptBlocks(text: string, model: string, adapter?: string): PromptBlocks {
  return blocksOfHashes(prefixHashes(text, prefixSeed(model, adapter)));
}
