// Reads the OpenAI request bodies the emulator serves into plain specs,
// refusing what vLLM would refuse with a 400 that names the field.
import { badRequest } from './errors.ts';
import type { ChatInput } from './engine-tokenizer.ts';
import { renderChat } from './prompt.ts';

export type GenerationKind = 'chat' | 'completion';

export interface GenerationSpec {
  readonly kind: GenerationKind;
  /** The `model` field as sent; absent means the base model. */
  readonly model: string | undefined;
  /** One rendered prompt per choice (chat has one; completions may send a list). */
  readonly prompts: readonly string[];
  /** max_tokens (or max_completion_tokens) as sent. */
  readonly maxTokens: number | undefined;
  readonly stream: boolean;
  readonly includeUsage: boolean;
  /** A chat as sent, for an engine with a tokenizer to render with its chat template. */
  readonly chat?: ChatInput;
  /** Choices per prompt (`n`). */
  readonly n: number;
  /** The body as sent: tools, response_format, stop and logprobs are read from it (output-plan.ts). */
  readonly body: Record<string, unknown>;
  /** completions with max_tokens 0 and echo: the prompt scored, nothing generated. */
  readonly echoOnly?: boolean;
}

export interface EmbeddingSpec {
  readonly model: string | undefined;
  readonly inputs: readonly string[];
  /** base64: little-endian float32s, which the openai client asks for by default. */
  readonly encoding: 'float' | 'base64';
}

type Body = Record<string, unknown>;

function asBody(body: unknown): Body {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('the request body must be a JSON object');
  return body as Body;
}

function optionalModel(body: Body): string | undefined {
  const model = body.model;
  if (model === undefined || model === null) return undefined;
  if (typeof model !== 'string' || model === '') throw badRequest('`model` must be a non-empty string', 'model');
  return model;
}

function optionalPositiveInt(body: Body, field: string): number | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) throw badRequest(`\`${field}\` must be an integer >= 1`, field);
  return value;
}

function streamFlags(body: Body): { stream: boolean; includeUsage: boolean } {
  const stream = body.stream ?? false;
  if (typeof stream !== 'boolean') throw badRequest('`stream` must be a boolean', 'stream');
  const options = body.stream_options;
  if (options === undefined || options === null) return { stream, includeUsage: false };
  if (typeof options !== 'object' || Array.isArray(options)) throw badRequest('`stream_options` must be an object', 'stream_options');
  if (!stream) throw badRequest('`stream_options` is only allowed when `stream` is true', 'stream_options');
  const includeUsage = (options as Body).include_usage ?? false;
  if (typeof includeUsage !== 'boolean') throw badRequest('`stream_options.include_usage` must be a boolean', 'stream_options');
  return { stream, includeUsage };
}

/** vLLM has no small cap on `n`; the emulator keeps it to 128 choices a prompt. */
function choices(body: Body): number {
  const n = body.n;
  if (n === undefined || n === null) return 1;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 128) throw badRequest('`n` must be an integer from 1 to 128', 'n');
  return n;
}

export function parseChatBody(raw: unknown): GenerationSpec {
  const body = asBody(raw);
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) throw badRequest('`messages` must be a non-empty array', 'messages');
  for (const message of messages) {
    if (message === null || typeof message !== 'object' || typeof (message as Body).role !== 'string') {
      throw badRequest('each message must be an object with a string `role`', 'messages');
    }
    const content = (message as Body).content;
    if (content !== undefined && content !== null && typeof content !== 'string' && !Array.isArray(content)) {
      throw badRequest('a message `content` must be a string or an array of parts', 'messages');
    }
  }
  return {
    kind: 'chat',
    model: optionalModel(body),
    prompts: [renderChat(messages as { role: string; content?: unknown }[])],
    maxTokens: optionalPositiveInt(body, 'max_completion_tokens') ?? optionalPositiveInt(body, 'max_tokens'),
    ...streamFlags(body),
    chat: chatInput(body, messages as ChatInput['messages']),
    n: choices(body),
    body,
  };
}

/** The fields vLLM hands the chat template. */
export function chatInput(body: Body, messages: ChatInput['messages']): ChatInput {
  const kwargs = body.chat_template_kwargs;
  if (kwargs !== undefined && kwargs !== null && (typeof kwargs !== 'object' || Array.isArray(kwargs))) {
    throw badRequest('`chat_template_kwargs` must be an object', 'chat_template_kwargs');
  }
  const addGenerationPrompt = body.add_generation_prompt ?? true;
  if (typeof addGenerationPrompt !== 'boolean') throw badRequest('`add_generation_prompt` must be a boolean', 'add_generation_prompt');
  const continueFinalMessage = body.continue_final_message ?? false;
  if (typeof continueFinalMessage !== 'boolean') throw badRequest('`continue_final_message` must be a boolean', 'continue_final_message');
  // vLLM's request validator, on the fields as sent (an unset add_generation_prompt does not count).
  if (continueFinalMessage && body.add_generation_prompt === true) {
    throw badRequest('Cannot set both `continue_final_message` and `add_generation_prompt` to True.', 'continue_final_message');
  }
  return {
    messages,
    tools: body.tools ?? undefined,
    chatTemplateKwargs: (kwargs as Record<string, unknown> | null) ?? undefined,
    addGenerationPrompt,
    continueFinalMessage,
  };
}

export function parseCompletionBody(raw: unknown): GenerationSpec {
  const body = asBody(raw);
  const prompt = body.prompt;
  let prompts: string[];
  if (typeof prompt === 'string') prompts = [prompt];
  else if (Array.isArray(prompt) && prompt.length > 0 && prompt.every((p) => typeof p === 'string')) prompts = prompt as string[];
  // prompt_embeds (vLLM --enable-prompt-embeds): a base64 tensor the emulator does not decode; one short prompt per tensor.
  else if (prompt === undefined && (typeof body.prompt_embeds === 'string' || Array.isArray(body.prompt_embeds)))
    prompts = Array.isArray(body.prompt_embeds) ? body.prompt_embeds.map(() => '') : [''];
  else throw badRequest('`prompt` must be a string or a non-empty array of strings', 'prompt');
  // max_tokens 0 with echo scores the prompt and generates nothing (vLLM accepts it).
  const echoOnly = body.max_tokens === 0 && body.echo === true;
  return {
    kind: 'completion',
    model: optionalModel(body),
    prompts,
    maxTokens: echoOnly ? undefined : optionalPositiveInt(body, 'max_tokens'),
    ...streamFlags(body),
    n: choices(body),
    body,
    echoOnly,
  };
}

export function parseEmbeddingBody(raw: unknown): EmbeddingSpec {
  const body = asBody(raw);
  const input = body.input;
  let inputs: string[];
  // vLLM embeds a chat conversation too, rendered as one input.
  if (input === undefined && Array.isArray(body.messages) && body.messages.length > 0)
    inputs = [renderChat(body.messages as { role: string; content?: unknown }[])];
  else if (typeof input === 'string') inputs = [input];
  else if (Array.isArray(input) && input.length > 0 && input.every((p) => typeof p === 'string')) inputs = input as string[];
  else throw badRequest('`input` must be a string or a non-empty array of strings', 'input');
  const encoding = body.encoding_format ?? 'float';
  if (encoding !== 'float' && encoding !== 'base64') throw badRequest('`encoding_format` must be "float" or "base64"', 'encoding_format');
  return { model: optionalModel(body), inputs, encoding };
}

export interface LoraAdapterSpec {
  readonly name: string;
  readonly path: string | undefined;
}

export function parseLoraBody(raw: unknown, needPath: boolean): LoraAdapterSpec {
  const body = asBody(raw);
  const name = body.lora_name;
  if (typeof name !== 'string' || name === '') throw badRequest('`lora_name` must be a non-empty string', 'lora_name');
  const path = body.lora_path;
  if (needPath && (typeof path !== 'string' || path === '')) throw badRequest('`lora_path` must be a non-empty string', 'lora_path');
  return { name, path: typeof path === 'string' ? path : undefined };
}
