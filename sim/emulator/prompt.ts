// How the emulator turns a request body into what the engine model needs:
// the rendered prompt, its token count (~4 characters a token) and the
// chained block hashes of its prefix. Rendering and hashing are the router's
// own (core/facts/prompt.ts, sdk/prefix.ts), so the emulated cache agrees
// with what a prefix-aware router predicts.
import { prefixHashes, prefixSeed } from '../../sdk/prefix.ts';

export { contentText, renderMessages as renderChat } from '../../core/facts/prompt.ts';

export const CHARS_PER_TOKEN = 4;

export function estimateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / CHARS_PER_TOKEN));
}

export function promptBlockHashes(text: string, model: string, adapter?: string): number[] {
  return prefixHashes(text, prefixSeed(model, adapter));
}
