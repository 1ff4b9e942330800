// JSON Schemas of the OpenAI request bodies, as far as routing reads them.
// Fields Switchyard doesn't know pass through to the engine untouched.

const common = {
  model: { type: 'string', minLength: 1 },
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
      items: {
        type: 'object',
        required: ['role'],
        properties: {
          role: { type: 'string', minLength: 1 },
          content: { type: ['string', 'array', 'null'] },
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
