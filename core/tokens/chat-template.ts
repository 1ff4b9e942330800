// Rendering a chat as vLLM does before it tokenizes (docs/tokens.md):
// messages normalised as vLLM's "string" content format (text parts joined
// by newlines, null content as ""), tool-call arguments parsed from their
// JSON strings, then the model's Jinja chat template with `messages`,
// `tools`, `documents`, `add_generation_prompt`, the special tokens of
// tokenizer_config.json and the request's `chat_template_kwargs`, exactly the
// variables transformers' apply_chat_template passes.
import { Environment, Interpreter } from '@huggingface/jinja';
import type { ChatTemplateFolder } from './folder.ts';

/** The parts of a chat request the template reads, structured-cloneable (it crosses to the worker). */
export interface ChatInput {
  readonly messages: readonly unknown[];
  readonly tools?: unknown;
  readonly documents?: unknown;
  readonly add_generation_prompt?: boolean;
  readonly continue_final_message?: boolean;
  readonly chat_template_kwargs?: Readonly<Record<string, unknown>>;
}

/** Why a chat cannot be counted exactly, or undefined when it can. */
export function unsupportedChat(body: Record<string, unknown>): string | undefined {
  if (body.chat_template !== undefined && body.chat_template !== null) return 'the request brings its own chat_template';
  if (body.add_generation_prompt === true && body.continue_final_message === true) return 'add_generation_prompt and continue_final_message are both set';
  for (const message of body.messages as { content?: unknown }[]) {
    if (!Array.isArray(message.content)) continue;
    for (const part of message.content as { type?: unknown }[]) {
      if (!part || typeof part !== 'object' || (part.type !== 'text' && part.type !== undefined))
        return 'a message has a non-text content part (image, audio, file)';
    }
  }
  return undefined;
}

/** The template's inputs from a (schema-checked) chat body. */
export function chatInput(body: Record<string, unknown>): ChatInput {
  const kwargs = body.chat_template_kwargs;
  return {
    messages: body.messages as unknown[],
    tools: body.tools ?? undefined,
    documents: body.documents ?? undefined,
    add_generation_prompt: typeof body.add_generation_prompt === 'boolean' ? body.add_generation_prompt : true,
    continue_final_message: body.continue_final_message === true,
    chat_template_kwargs: kwargs && typeof kwargs === 'object' && !Array.isArray(kwargs) ? (kwargs as Record<string, unknown>) : undefined,
  };
}

function messageText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  const texts: string[] = [];
  for (const part of content as { text?: unknown }[]) if (part && typeof part.text === 'string') texts.push(part.text);
  return texts.join('\n');
}

/** vLLM's conversation: content as a string, assistant tool-call arguments as objects. */
function conversation(messages: readonly unknown[]): Record<string, unknown>[] {
  return messages.map(templateMessage);
}

/** One message as the template sees it (vLLM's normalisation, message by message). */
export function templateMessage(m: unknown): Record<string, unknown> {
  const message: Record<string, unknown> = { ...(m as Record<string, unknown>), content: messageText((m as { content?: unknown }).content) };
  if (Array.isArray(message.tool_calls)) {
    message.tool_calls = (message.tool_calls as Record<string, unknown>[]).map((call) => {
      const fn = call?.function as { arguments?: unknown } | undefined;
      if (!fn || typeof fn.arguments !== 'string') return call;
      let args: unknown = fn.arguments;
      try {
        args = JSON.parse(fn.arguments);
      } catch {
        // vLLM would refuse the request; the template sees the string.
      }
      return { ...call, function: { ...fn, arguments: args } };
    });
  }
  return message;
}

const pad2 = (n: number) => (n < 10 ? `0${n}` : String(n));
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];

/** Python's strftime for the directives chat templates use, in UTC (the engine's clock must agree: docs/tokens.md). */
export function strftimeUtc(date: Date, format: string): string {
  let out = '';
  for (let i = 0; i < format.length; i++) {
    const c = format[i];
    if (c !== '%' || i + 1 === format.length) {
      out += c;
      continue;
    }
    const d = format[++i];
    if (d === 'Y') out += date.getUTCFullYear();
    else if (d === 'm') out += pad2(date.getUTCMonth() + 1);
    else if (d === 'd') out += pad2(date.getUTCDate());
    else if (d === 'b') out += MONTHS[date.getUTCMonth()].slice(0, 3);
    else if (d === 'B') out += MONTHS[date.getUTCMonth()];
    else if (d === 'H') out += pad2(date.getUTCHours());
    else if (d === 'M') out += pad2(date.getUTCMinutes());
    else if (d === 'S') out += pad2(date.getUTCSeconds());
    else if (d === '%') out += '%';
    else out += `%${d}`;
  }
  return out;
}

function range(start: number, stop?: number, step = 1): number[] {
  if (stop === undefined) [start, stop] = [0, start];
  if (step === 0) throw new Error('range() step must not be zero');
  const out: number[] = [];
  if (step > 0) for (let i = start; i < stop; i += step) out.push(i);
  else for (let i = start; i > stop; i += step) out.push(i);
  return out;
}

/**
 * The template's environment for this chat: @huggingface/jinja's globals
 * with strftime_now on the given clock, the folder's special tokens, the
 * request's chat_template_kwargs, messages, tools, documents and
 * add_generation_prompt, as transformers' apply_chat_template passes them.
 */
export function chatEnvironment(folder: ChatTemplateFolder, input: ChatInput, now: Date, messages = conversation(input.messages)): Environment {
  const env = new Environment();
  const globals: Record<string, unknown> = {
    false: false,
    true: true,
    none: null,
    False: false,
    True: true,
    None: null,
    raise_exception: (message: unknown) => {
      throw new Error(`the chat template raised: ${String(message)}`);
    },
    range,
    strftime_now: (format: unknown) => strftimeUtc(now, String(format)),
  };
  const variables: Record<string, unknown> = {
    ...folder.specialTokens,
    ...(input.chat_template_kwargs ?? {}),
    messages,
    tools: input.tools ?? null,
    documents: input.documents ?? null,
    add_generation_prompt: input.add_generation_prompt ?? true,
  };
  for (const [name, value] of Object.entries({ ...globals, ...variables })) env.set(name, value);
  return env;
}

/**
 * The prompt text the engine tokenizes for this chat. `now` is what the
 * template's strftime_now sees. Throws when the folder has no chat template
 * or the template raises: the caller falls back to the estimate.
 */
export function renderChat(folder: ChatTemplateFolder, input: ChatInput, now: Date): string {
  if (!folder.template) throw new Error('the tokenizer_config.json has no chat_template');
  const messages = conversation(input.messages);
  let text = new Interpreter(chatEnvironment(folder, input, now, messages)).run(folder.template.parsed).value as string;
  if (input.continue_final_message) {
    // As transformers does: cut the rendering right after the final message's content.
    const final = String(messages[messages.length - 1]?.content ?? '').trim();
    const at = final === '' ? -1 : text.lastIndexOf(final);
    if (at >= 0) text = text.slice(0, at + final.length);
  }
  return text;
}
