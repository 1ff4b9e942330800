// The response bodies and stream chunks of vLLM's OpenAI-compatible server,
// field for field, so clients and the router's stream handling meet the
// shapes they will meet in production.
import type { FinishReason } from '../engine/types.ts';
import type { GenerationKind } from './parse-request.ts';

export interface Usage {
  prompt_tokens: number;
  total_tokens: number;
  completion_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

export interface ChoiceResult {
  readonly text: string;
  readonly finishReason: FinishReason | null;
  /** Fields that replace or add to the choice's (tool calls, logprobs, stop_reason). */
  readonly extra?: Record<string, unknown>;
}

export interface ResponseHead {
  readonly id: string;
  readonly created: number;
  readonly model: string;
}

export function usage(promptTokens: number, completionTokens: number, cachedTokens: number): Usage {
  return {
    prompt_tokens: promptTokens,
    total_tokens: promptTokens + completionTokens,
    completion_tokens: completionTokens,
    prompt_tokens_details: { cached_tokens: cachedTokens },
  };
}

/** A response id: chatcmpl-… for chat, cmpl-… for completions, as vLLM names them. */
export function responseId(kind: GenerationKind, unique: string): string {
  return `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${unique}`;
}

export function fullResponse(kind: GenerationKind, head: ResponseHead, choices: readonly ChoiceResult[], totals: Usage): object {
  if (kind === 'chat') {
    return {
      id: head.id,
      object: 'chat.completion',
      created: head.created,
      model: head.model,
      choices: choices.map((choice, index) => ({
        index,
        message: { role: 'assistant', content: choice.text, tool_calls: [] },
        logprobs: null,
        finish_reason: choice.finishReason,
        stop_reason: null,
        ...choice.extra,
      })),
      usage: totals,
      prompt_logprobs: null,
    };
  }
  return {
    id: head.id,
    object: 'text_completion',
    created: head.created,
    model: head.model,
    choices: choices.map((choice, index) => ({
      index,
      text: choice.text,
      logprobs: null,
      finish_reason: choice.finishReason,
      stop_reason: null,
      prompt_logprobs: null,
      ...choice.extra,
    })),
    usage: totals,
  };
}

/** The chunk opening a chat choice: vLLM sends the role with empty content before the first token. */
export function roleChunk(head: ResponseHead, index: number): string {
  return sse({
    id: head.id,
    object: 'chat.completion.chunk',
    created: head.created,
    model: head.model,
    choices: [{ index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
  });
}

/** One token's chunk; the last token of a choice carries its finish_reason. */
export function tokenChunk(kind: GenerationKind, head: ResponseHead, index: number, text: string, finishReason: FinishReason | null): string {
  if (kind === 'chat') {
    return sse({
      id: head.id,
      object: 'chat.completion.chunk',
      created: head.created,
      model: head.model,
      choices: [{ index, delta: { content: text }, logprobs: null, finish_reason: finishReason, stop_reason: null }],
    });
  }
  return sse({
    id: head.id,
    object: 'text_completion',
    created: head.created,
    model: head.model,
    choices: [{ index, text, logprobs: null, finish_reason: finishReason, stop_reason: null }],
  });
}

/** stream_options.include_usage: a last chunk with no choices and the usage. */
export function usageChunk(kind: GenerationKind, head: ResponseHead, totals: Usage): string {
  return sse({
    id: head.id,
    object: kind === 'chat' ? 'chat.completion.chunk' : 'text_completion',
    created: head.created,
    model: head.model,
    choices: [],
    usage: totals,
  });
}

export const DONE_CHUNK = 'data: [DONE]\n\n';

function sse(payload: object): string {
  return `data: ${JSON.stringify(payload)}\n\n`;
}

/** A streamed chat tool call as vLLM streams it: the call's id and name first, then its arguments in pieces. */
export function toolCallStream(head: ResponseHead, call: { id: string; function: { name: string } }, includeUsage: boolean) {
  const chunk = (index: number, delta: object, finishReason: string | null) =>
    sse({
      id: head.id,
      object: 'chat.completion.chunk',
      created: head.created,
      model: head.model,
      choices: [{ index, delta, logprobs: null, finish_reason: finishReason }],
    });
  return {
    open: () => '',
    token(choice: number, index: number, text: string) {
      const opening =
        index === 0
          ? chunk(choice, { role: 'assistant', content: '' }, null) +
            chunk(choice, { tool_calls: [{ index: 0, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }] }, null)
          : '';
      return opening + chunk(choice, { tool_calls: [{ index: 0, function: { arguments: text } }] }, null);
    },
    close(outcomes: readonly unknown[], totals: Usage) {
      let out = '';
      for (let i = 0; i < outcomes.length; i++) out += chunk(i, {}, 'tool_calls');
      if (includeUsage) out += usageChunk('chat', head, totals);
      return out + DONE_CHUNK;
    },
    body: () => ({}),
  };
}
