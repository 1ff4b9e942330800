// How the emulator turns a request into what the engine model needs: the
// token ids of the whole sequence it will hold (the prompt, then the answer
// it will generate) cut into 16-token blocks, each named by vLLM's chained
// block hash (vllm-block-hash.ts) and carrying its token ids for KV events.
// With a tokenizer (the model's Hugging Face folder) the ids are the
// engine's real ones, from the chat template; without one, each ~4
// characters of the rendered prompt stand for a token (a pseudo id). Either
// way the names are the engine's own, random per process: a router can only
// match them by token content, as it must a real vLLM.
import { hashRange } from '../../sdk/hashing.ts';
import { blocksOf, type PromptBlocks } from '../engine/prompt-blocks.ts';
import type { EngineTokenizer } from './engine-tokenizer.ts';
import { fillerText } from './filler.ts';
import type { VllmBlockHasher } from './vllm-block-hash.ts';

export { contentText, renderMessages as renderChat } from '../../core/facts/prompt.ts';

export const CHARS_PER_TOKEN = 4;
/** What the chat template puts before the answer (without a tokenizer); a follow-up turn renders the answer after it. */
export const ASSISTANT_HEADER = '<|assistant|>\n';

export function estimateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / CHARS_PER_TOKEN));
}

/** The sequence's blocks: every full block of `ids`, named by vLLM's hash; no cap (the engine caches every full block). */
export function tokenBlocks(ids: readonly number[], blockSize: number, hasher: VllmBlockHasher, adapter: string | undefined): PromptBlocks {
  const digests = hasher.digests(ids, blockSize, adapter);
  const blocks = blocksOf(
    // The cache tells sequences apart by 32 bits of each block's digest, which covers everything before it.
    digests.map((d) => d.readUInt32LE(0)),
    digests.map((d) => hasher.published(d)),
    (block) => ids.slice(block * blockSize, (block + 1) * blockSize),
  );
  return adapter === undefined ? blocks : { ...blocks, adapter };
}

/**
 * Without a tokenizer: pseudo token ids of the rendered prompt, then (for
 * chat) the assistant header and the answer, ~4 characters a token.
 */
export function pseudoTokenIds(prompt: string, maxTokens: number, chat: boolean): number[] {
  const text = (chat ? prompt + ASSISTANT_HEADER : prompt) + fillerText(maxTokens);
  const tokens = Math.floor(text.length / CHARS_PER_TOKEN);
  const ids = new Array<number>(tokens);
  for (let t = 0; t < tokens; t++) ids[t] = hashRange(text, t * CHARS_PER_TOKEN, (t + 1) * CHARS_PER_TOKEN) >>> 1;
  return ids;
}

/**
 * The generated answer's token ids, `maxTokens` of them: the filler words
 * (generate.ts), the first without its leading space when it opens an
 * assistant turn (as a chat template renders it back, trimmed).
 */
export function answerTokenIds(tokenizer: EngineTokenizer, maxTokens: number, chat: boolean): number[] {
  const key = `${chat ? 'c' : 't'}${maxTokens}`;
  let ids = answers.get(tokenizer)?.get(key);
  if (!ids) {
    const text = fillerText(maxTokens);
    ids = tokenizer.encode(chat ? text.trimStart() : text, false).slice(0, maxTokens);
    let cache = answers.get(tokenizer);
    if (!cache) answers.set(tokenizer, (cache = new Map()));
    if (cache.size >= 256) cache.clear();
    cache.set(key, ids);
  }
  return ids;
}

const answers = new WeakMap<EngineTokenizer, Map<string, number[]>>();

/** Without a tokenizer: the blocks of a rendered prompt and its answer (pseudo token ids), named by vLLM's hash. */
export function sequenceBlocks(prompt: string, maxTokens: number, hasher: VllmBlockHasher, adapter: string | undefined, chat: boolean): PromptBlocks {
  return tokenBlocks(pseudoTokenIds(prompt, maxTokens, chat), BLOCK_TOKENS, hasher, adapter);
}

/** vLLM's default block size. */
export const BLOCK_TOKENS = 16;
