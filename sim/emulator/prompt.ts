// How the emulator turns a request body into what the engine model needs:
// the rendered prompt, its token count (~4 characters a token) and the
// chained block hashes of the whole sequence it will hold: the prompt, then
// (for chat) the assistant turn's header and the answer it will generate.
// Rendering and hashing are the router's own (core/facts/prompt.ts,
// sdk/prefix.ts), so the emulated cache agrees with what a prefix-aware
// router predicts, and a conversation's next turn, whose prompt repeats this
// answer, finds the answer's blocks cached as vLLM's would.
import { hashRange } from '../../sdk/hashing.ts';
import { prefixHashes, prefixSeed } from '../../sdk/prefix.ts';
import { blocksOfHashes, type PromptBlocks } from '../engine/prompt-blocks.ts';
import { fillerText } from './filler.ts';

export { contentText, renderMessages as renderChat } from '../../core/facts/prompt.ts';

export const CHARS_PER_TOKEN = 4;
/** Characters of one engine block (16 tokens): the router's prefix block. */
const BLOCK_CHARS = 16 * CHARS_PER_TOKEN;
/** What the chat template puts before the answer; a follow-up turn renders the answer after it. */
export const ASSISTANT_HEADER = '<|assistant|>\n';

export function estimateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / CHARS_PER_TOKEN));
}

/**
 * The sequence's blocks for the engine model: one run per chained block hash
 * over the prompt and the answer it will generate, with no cap (the engine
 * caches every full block; the router's cap is a routing choice). Block j
 * stands for characters [64j, 64j + 64), the emulator's ~4 characters a
 * token; its token ids are those characters in fours.
 */
export function sequenceBlocks(prompt: string, maxTokens: number, model: string, adapter: string | undefined, chat: boolean): PromptBlocks {
  const text = (chat ? prompt + ASSISTANT_HEADER : prompt) + fillerText(maxTokens);
  const hashes = prefixHashes(text, prefixSeed(model, adapter), BLOCK_CHARS, Infinity);
  return blocksOfHashes(hashes, (block) => tokenIdsOf(text, block));
}

/** Pseudo token ids of block j: a hash of each 4-character token, in 31 bits (vLLM's are vocabulary ids). */
function tokenIdsOf(text: string, block: number): number[] {
  const ids = new Array<number>(16);
  for (let t = 0; t < 16; t++) {
    const start = block * BLOCK_CHARS + t * CHARS_PER_TOKEN;
    ids[t] = hashRange(text, start, start + CHARS_PER_TOKEN) >>> 1;
  }
  return ids;
}
