// vLLM's POST /tokenize and POST /detokenize, with the engine's own
// tokenizer: a completion prompt ({prompt, add_special_tokens = true}) or a
// chat ({messages, add_generation_prompt = true, add_special_tokens = false,
// tools, chat_template_kwargs}) → {count, max_model_len, tokens, token_strs};
// {tokens} → {prompt}. This is what a router's `tokenizer: engine` asks.
import type { FastifyInstance } from 'fastify';
import type { EngineTokenizer } from './engine-tokenizer.ts';
import { badRequest } from './errors.ts';
import { chatInput } from './parse-request.ts';

/** Most token ids one /detokenize takes: a whole context of the largest models. */
const MAX_DETOKENIZE = 1_048_576;

export interface TokenizeRouteOptions {
  readonly tokenizer: EngineTokenizer | undefined;
  readonly maxModelLen: number;
  /** Throws vLLM's 404 for a model the engine does not serve. */
  readonly resolveModel: (model: string | undefined) => unknown;
}

type Body = Record<string, unknown>;

function body(raw: unknown): Body {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw badRequest('the request body must be a JSON object');
  return raw as Body;
}

function flag(b: Body, field: string, fallback: boolean): boolean {
  const value = b[field] ?? fallback;
  if (typeof value !== 'boolean') throw badRequest(`\`${field}\` must be a boolean`, field);
  return value;
}

export function tokenizeRoutes(app: FastifyInstance, options: TokenizeRouteOptions): void {
  const need = (): EngineTokenizer => {
    if (!options.tokenizer) {
      throw badRequest(
        'this emulated engine has no tokenizer: start it with --tokenizer DIR (a Hugging Face tokenizer folder), or give the model a `tokenizer` in models.yaml',
      );
    }
    return options.tokenizer;
  };

  app.post('/tokenize', async (request) => {
    const b = body(request.body);
    const model = b.model;
    if (model !== undefined && model !== null && typeof model !== 'string') throw badRequest('`model` must be a string', 'model');
    options.resolveModel((model as string | null) ?? undefined);
    const tokenizer = need();
    let tokens: number[];
    if (b.messages !== undefined) {
      if (!Array.isArray(b.messages) || b.messages.some((m) => m === null || typeof m !== 'object' || typeof (m as Body).role !== 'string')) {
        throw badRequest('`messages` must be an array of objects with a string `role`', 'messages');
      }
      const chat = chatInput(b, b.messages as never);
      let text: string;
      try {
        text = tokenizer.renderChat(chat);
      } catch (error) {
        throw badRequest(`the chat template failed to render: ${String((error as Error).message).slice(0, 300)}`, 'messages');
      }
      tokens = tokenizer.encode(text, flag(b, 'add_special_tokens', false));
    } else if (typeof b.prompt === 'string') {
      tokens = tokenizer.encode(b.prompt, flag(b, 'add_special_tokens', true));
    } else {
      throw badRequest('send `prompt` (a string) or `messages` (a chat)', 'prompt');
    }
    return { count: tokens.length, max_model_len: options.maxModelLen, tokens, token_strs: null };
  });

  app.post('/detokenize', async (request) => {
    const b = body(request.body);
    const model = b.model;
    if (model !== undefined && model !== null && typeof model !== 'string') throw badRequest('`model` must be a string', 'model');
    options.resolveModel((model as string | null) ?? undefined);
    const tokenizer = need();
    const tokens = b.tokens;
    if (!Array.isArray(tokens) || tokens.length > MAX_DETOKENIZE || !tokens.every((t) => Number.isInteger(t) && t >= 0)) {
      throw badRequest(`\`tokens\` must be an array of at most ${MAX_DETOKENIZE} non-negative integers`, 'tokens');
    }
    return { prompt: tokenizer.decode(tokens as number[]) };
  });
}
