// JSON Schemas of the OpenAI request bodies, as far as routing reads them.
// Fields Switchyard doesn't know pass through to the engine untouched.
// The counts are bounded so that the work and memory a request costs before it
// is routed stay bounded too (docs/reliability.md); the body size bounds the rest.

/** Longest model name: real ones (with an adapter or an org prefix) are under 100. */
export const MAX_MODEL_NAME_CHARS = 256;
/** Most messages in a chat request, and most content parts in one message. */
export const MAX_MESSAGES = 4096;
export const MAX_CONTENT_PARTS = 1024;

const common = {
  model: { type: 'string', minLength: 1, maxLength: MAX_MODEL_NAME_CHARS },
  max_tokens: { type: ['integer', 'null'], minimum: 1 },
  max_completion_tokens: { type: ['integer', 'null'], minimum: 1 },
  stream: { type: ['boolean', 'null'] },
  stream_options: { type: ['object', 'null'], properties: { include_usage: { type: ['boolean', 'null'] } } },
} as const;

export const chatCompletionBody = {
  type: 'object',
  required: ['model', 'messages'],
  properties: {
    ...common,
    messages: {
      type: 'array',
      minItems: 1,
      maxItems: MAX_MESSAGES,
      items: {
        type: 'object',
        required: ['role'],
        properties: {
          role: { type: 'string', minLength: 1 },
          content: { type: ['string', 'array', 'null'], maxItems: MAX_CONTENT_PARTS },
        },
      },
    },
  },
} as const;

export const completionBody = {
  type: 'object',
  required: ['model', 'prompt'],
  properties: {
    ...common,
    prompt: {
      anyOf: [
        { type: 'string' },
        { type: 'array', minItems: 1, items: { anyOf: [{ type: 'string' }, { type: 'integer' }, { type: 'array', items: { type: 'integer' } }] } },
      ],
    },
  },
} as const;

export const embeddingBody = {
  type: 'object',
  required: ['model', 'input'],
  properties: {
    model: common.model,
    input: {
      anyOf: [
        { type: 'string' },
        { type: 'array', minItems: 1, items: { anyOf: [{ type: 'string' }, { type: 'integer' }, { type: 'array', items: { type: 'integer' } }] } },
      ],
    },
  },
} as const;

export type Endpoint = 'chat' | 'completions' | 'embeddings';

export const BODY_SCHEMAS: Record<Endpoint, object> = {
  chat: chatCompletionBody,
  completions: completionBody,
  embeddings: embeddingBody,
};
