// The Responses API (/v1/responses) and Anthropic's Messages API
// (/v1/messages) as vLLM serves them: request bodies read into a prompt,
// the response bodies and the named SSE events their clients parse, and
// vLLM's in-memory store of responses that previous_response_id continues
// (an unknown id is a 404, as vLLM answers).
import { randomUUID } from 'node:crypto';
import { badRequest, EmulatorError } from './errors.ts';
import type { ApiFormat, ChoiceOutcome } from './generate.ts';
import { contentText, renderChat } from './prompt.ts';
import type { Usage } from './responses.ts';

type Body = Record<string, unknown>;
export type Message = { role: string; content: string };

const hex = () => randomUUID().replaceAll('-', '');
const now = () => Math.floor(Date.now() / 1000);
const event = (type: string, payload: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...payload })}\n\n`;

/** vLLM keeps stored responses in memory; the emulator keeps the newest 10,000. */
export class ResponseStore {
  private readonly entries = new Map<string, { readonly messages: readonly Message[]; readonly response: object }>();
  constructor(private readonly capacity = 10_000) {}

  get(id: string) {
    return this.entries.get(id);
  }

  put(id: string, messages: readonly Message[], response: object): void {
    this.entries.delete(id);
    this.entries.set(id, { messages, response });
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value!);
  }
}

/** vLLM's answer for a previous_response_id it does not hold. */
export function responseNotFound(id: string): EmulatorError {
  const error = new EmulatorError('NotFoundError', `Response with id '${id}' not found.`);
  return Object.assign(error, { toBody: () => ({ error: { message: error.message, type: 'invalid_request_error', param: null, code: 404 } }) });
}

export interface ResponsesSpec {
  readonly id: string;
  readonly model: string | undefined;
  /** The whole conversation the engine sees: the stored chain, then this request's input. */
  readonly messages: readonly Message[];
  readonly maxTokens: number | undefined;
  readonly stream: boolean;
  readonly store: boolean;
  readonly previousResponseId: string | null;
  readonly instructions: string | null;
}

function inputMessages(input: unknown): Message[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  if (!Array.isArray(input)) throw badRequest('`input` must be a string or a list of input items', 'input');
  const messages: Message[] = [];
  for (const item of input as Body[]) {
    if (item === null || typeof item !== 'object') throw badRequest('each input item must be an object', 'input');
    if (typeof item.role === 'string') messages.push({ role: item.role, content: contentText(item.content) });
    else if (item.type === 'function_call_output') messages.push({ role: 'tool', content: String(item.output ?? '') });
    else if (item.type === 'function_call') messages.push({ role: 'assistant', content: String(item.arguments ?? '') });
  }
  return messages;
}

export function parseResponsesBody(raw: unknown, store: ResponseStore): ResponsesSpec {
  const body = raw as Body;
  if (body === null || typeof body !== 'object') throw badRequest('the request body must be a JSON object');
  const previous = typeof body.previous_response_id === 'string' ? body.previous_response_id : null;
  const earlier = previous === null ? [] : store.get(previous)?.messages;
  if (earlier === undefined) throw responseNotFound(previous!);
  const instructions = typeof body.instructions === 'string' ? body.instructions : null;
  const messages = [...(instructions ? [{ role: 'system', content: instructions }] : []), ...earlier, ...inputMessages(body.input ?? [])];
  if (messages.length === 0) throw badRequest('`input` must not be empty', 'input');
  const maxTokens = body.max_output_tokens;
  if (maxTokens !== undefined && maxTokens !== null && !(Number.isInteger(maxTokens) && (maxTokens as number) >= 1))
    throw badRequest('`max_output_tokens` must be an integer >= 1', 'max_output_tokens');
  return {
    // vLLM names the response after the request's request_id when one is given.
    id: typeof body.request_id === 'string' && body.request_id !== '' ? body.request_id : `resp_${hex()}`,
    model: typeof body.model === 'string' ? body.model : undefined,
    messages,
    maxTokens: (maxTokens ?? undefined) as number | undefined,
    stream: body.stream === true,
    store: body.store !== false,
    previousResponseId: previous,
    instructions,
  };
}

export const promptOf = (messages: readonly Message[]): string => renderChat(messages);

/** The Responses API's body and events for one generation, storing the response when it is done. */
export function responsesFormat(spec: ResponsesSpec, model: string, store: ResponseStore): ApiFormat {
  const itemId = `msg_${hex()}`;
  const createdAt = now();
  let sequence = 0;
  let streamed = '';
  const response = (status: string, outcome: ChoiceOutcome | undefined, totals: Usage | undefined) => ({
    id: spec.id,
    created_at: createdAt,
    incomplete_details: outcome?.finishReason === 'length' ? { reason: 'max_output_tokens' } : null,
    instructions: spec.instructions,
    metadata: null,
    model,
    object: 'response',
    output: outcome ? [messageItem(outcome.text, 'completed')] : [],
    parallel_tool_calls: true,
    temperature: 1.0,
    tool_choice: 'auto',
    tools: [],
    top_p: 1.0,
    background: false,
    max_output_tokens: spec.maxTokens ?? null,
    max_tool_calls: null,
    previous_response_id: spec.previousResponseId,
    prompt: null,
    reasoning: null,
    service_tier: 'auto',
    status: outcome?.finishReason === 'length' ? 'incomplete' : status,
    text: null,
    top_logprobs: null,
    truncation: 'disabled',
    usage: totals
      ? {
          input_tokens: totals.prompt_tokens,
          input_tokens_details: { cached_tokens: totals.prompt_tokens_details.cached_tokens },
          output_tokens: totals.completion_tokens,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: totals.total_tokens,
        }
      : null,
    user: null,
  });
  const messageItem = (text: string, status: string) => ({
    id: itemId,
    content: [{ annotations: [], text, type: 'output_text', logprobs: null }],
    role: 'assistant',
    status,
    type: 'message',
  });
  const finished = (outcomes: readonly ChoiceOutcome[], totals: Usage) => {
    const body = response('completed', outcomes[0], totals);
    if (spec.store)
      store.put(
        spec.id,
        [...spec.messages.filter((m, i) => !(i === 0 && spec.instructions && m.role === 'system')), { role: 'assistant', content: outcomes[0].text }],
        body,
      );
    return body;
  };
  const next = (type: string, payload: object) => event(type, { ...payload, sequence_number: sequence++ });
  return {
    open: () =>
      next('response.created', { response: response('in_progress', undefined, undefined) }) +
      next('response.in_progress', { response: response('in_progress', undefined, undefined) }),
    token(_choice, index, text) {
      let out = '';
      if (index === 0) {
        out += next('response.output_item.added', {
          output_index: 0,
          item: { id: itemId, content: [], role: 'assistant', status: 'in_progress', type: 'message' },
        });
        out += next('response.content_part.added', {
          item_id: itemId,
          output_index: 0,
          content_index: 0,
          part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
        });
      }
      streamed += text;
      return out + next('response.output_text.delta', { item_id: itemId, output_index: 0, content_index: 0, delta: text, logprobs: [] });
    },
    close(outcomes, totals) {
      const body = finished(outcomes, totals);
      const part = { type: 'output_text', text: streamed, annotations: [], logprobs: null };
      return (
        next('response.output_text.done', { item_id: itemId, output_index: 0, content_index: 0, text: streamed, logprobs: [] }) +
        next('response.content_part.done', { item_id: itemId, output_index: 0, content_index: 0, part }) +
        next('response.output_item.done', { output_index: 0, item: messageItem(streamed, 'completed') }) +
        next(body.status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response: body })
      );
    },
    body: finished,
  };
}

export interface MessagesSpec {
  readonly model: string | undefined;
  readonly messages: readonly Message[];
  readonly maxTokens: number;
  readonly stream: boolean;
  readonly stopSequences: readonly string[];
}

function anthropicText(content: unknown): string {
  if (!Array.isArray(content)) return contentText(content);
  let text = '';
  for (const block of content as Body[]) {
    if (block?.type === 'text' && typeof block.text === 'string') text += block.text;
    else if (block?.type === 'tool_result') text += anthropicText(block.content);
  }
  return text;
}

/** An Anthropic Messages request; vLLM refuses one without max_tokens, as Anthropic does. */
export function parseMessagesBody(raw: unknown): MessagesSpec {
  const body = raw as Body;
  if (body === null || typeof body !== 'object') throw badRequest('the request body must be a JSON object');
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw badRequest('`messages` must be a non-empty array', 'messages');
  if (!Number.isInteger(body.max_tokens) || (body.max_tokens as number) < 1) throw badRequest('`max_tokens` is required: an integer >= 1', 'max_tokens');
  const messages: Message[] = (body.messages as Body[]).map((m) => ({ role: String(m?.role ?? 'user'), content: anthropicText(m?.content) }));
  if (body.system !== undefined) messages.unshift({ role: 'system', content: anthropicText(body.system) });
  const stop = Array.isArray(body.stop_sequences) ? (body.stop_sequences as unknown[]).filter((s): s is string => typeof s === 'string' && s !== '') : [];
  return {
    model: typeof body.model === 'string' ? body.model : undefined,
    messages,
    maxTokens: body.max_tokens as number,
    stream: body.stream === true,
    stopSequences: stop,
  };
}

/** Anthropic's message body and its stream of message_start … message_stop events. */
export function messagesFormat(model: string, stopSequence: string | null, promptTokens: number): ApiFormat {
  const id = `msg_${hex()}`;
  const stopReason = (outcome: ChoiceOutcome) => (outcome.finishReason === 'length' ? 'max_tokens' : stopSequence ? 'stop_sequence' : 'end_turn');
  return {
    open: () => '',
    token(_choice, index, text) {
      let out = '';
      if (index === 0) {
        out += event('message_start', {
          message: {
            id,
            type: 'message',
            role: 'assistant',
            content: [],
            model,
            stop_reason: null,
            stop_sequence: null,
            usage: { input_tokens: promptTokens, output_tokens: 0 },
          },
        });
        out += event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
        out += event('ping', {});
      }
      return out + event('content_block_delta', { index: 0, delta: { type: 'text_delta', text } });
    },
    close(outcomes, totals) {
      return (
        event('content_block_stop', { index: 0 }) +
        event('message_delta', {
          delta: { stop_reason: stopReason(outcomes[0]), stop_sequence: stopSequence },
          usage: { input_tokens: totals.prompt_tokens, output_tokens: totals.completion_tokens },
        }) +
        event('message_stop', {})
      );
    },
    body: (outcomes, totals) => ({
      id,
      type: 'message',
      role: 'assistant',
      content: [{ type: 'text', text: outcomes[0].text }],
      model,
      stop_reason: stopReason(outcomes[0]),
      stop_sequence: stopSequence,
      usage: { input_tokens: totals.prompt_tokens, output_tokens: totals.completion_tokens },
    }),
  };
}
