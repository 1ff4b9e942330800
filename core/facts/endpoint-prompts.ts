// The prompt of a request to one of vLLM's other routes (Responses, Anthropic
// Messages, tokenize, rerank, score, pooling, classify, audio), as text: what
// token estimates, code detection and prefix hashes are computed from, as for
// chat and completions (prompt.ts). Reads only what the body schema admitted.
import { contentText, renderMessages } from './prompt.ts';
import type { VllmEndpoint } from './request-schemas.ts';

export interface EndpointPrompt {
  readonly text: string;
  readonly messageCount: number;
  /** Output tokens asked for, when the API has such a field. */
  readonly maxTokens?: number;
  /** Tokens sent as ids (detokenize), counted on top of the text's estimate. */
  readonly tokenIds?: number;
}

type Body = Record<string, unknown>;
type Message = { role: string; content?: unknown };

/** Responses API input items as chat messages: instructions as a system turn, tool outputs as tool turns. */
function responsesMessages(body: Body): Message[] {
  const messages: Message[] = [];
  if (typeof body.instructions === 'string') messages.push({ role: 'system', content: body.instructions });
  const input = body.input;
  if (typeof input === 'string') messages.push({ role: 'user', content: input });
  else if (Array.isArray(input)) {
    for (const item of input as Body[]) {
      if (typeof item.role === 'string') messages.push({ role: item.role, content: item.content });
      else if (item.type === 'function_call_output') messages.push({ role: 'tool', content: typeof item.output === 'string' ? item.output : '' });
      else if (item.type === 'function_call') messages.push({ role: 'assistant', content: typeof item.arguments === 'string' ? item.arguments : '' });
    }
  }
  return messages;
}

/** Anthropic content blocks: text blocks carry text; tool results carry content of their own. */
function anthropicText(content: unknown): string {
  if (!Array.isArray(content)) return contentText(content);
  let text = '';
  for (const block of content as Body[]) {
    if (block === null || typeof block !== 'object') continue;
    if (typeof block.text === 'string') text += block.text;
    else if (block.type === 'tool_result') text += anthropicText(block.content);
    else if (block.type === 'tool_use' && block.input !== undefined) text += JSON.stringify(block.input).slice(0, 65_536);
  }
  return text;
}

function joined(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Array.isArray(value))
    return value
      .map((v) => (typeof v === 'string' ? v : v !== null && typeof v === 'object' ? contentText((v as Body).text ?? (v as Body).content) : ''))
      .join('\n');
  return '';
}

function itemCount(value: unknown): number {
  return Array.isArray(value) ? value.length : value === undefined ? 0 : 1;
}

export function endpointPrompt(endpoint: VllmEndpoint, body: Body): EndpointPrompt {
  switch (endpoint) {
    case 'responses': {
      const messages = responsesMessages(body);
      return {
        text: renderMessages(messages),
        messageCount: Math.max(1, messages.length),
        maxTokens: (body.max_output_tokens ?? undefined) as number | undefined,
      };
    }
    case 'messages': {
      const messages = (body.messages as Message[]).map((m) => ({ role: m.role, content: anthropicText(m.content) }));
      if (body.system !== undefined) messages.unshift({ role: 'system', content: anthropicText(body.system) });
      return { text: renderMessages(messages), messageCount: messages.length, maxTokens: body.max_tokens as number };
    }
    case 'tokenize':
    case 'pooling':
    case 'classify':
      if (Array.isArray(body.messages)) return { text: renderMessages(body.messages as Message[]), messageCount: body.messages.length };
      return { text: joined(body.prompt ?? body.input), messageCount: 1 };
    case 'detokenize':
      return { text: '', messageCount: 1, tokenIds: (body.tokens as unknown[]).length };
    case 'rerank': {
      const query = typeof body.query === 'string' ? body.query : '';
      return { text: `${query}\n${joined(body.documents)}`, messageCount: 1 + itemCount(body.documents) };
    }
    case 'score': {
      const first = body.text_1 ?? body.queries ?? body.data_1;
      const second = body.text_2 ?? body.documents ?? body.data_2;
      return { text: `${joined(first)}\n${joined(second)}`, messageCount: itemCount(first) + itemCount(second) };
    }
    case 'transcriptions':
    case 'translations':
      // The audio's length is not read: the prompt is the optional text that guides the model.
      return { text: typeof body.prompt === 'string' ? body.prompt : '', messageCount: 1 };
  }
}
