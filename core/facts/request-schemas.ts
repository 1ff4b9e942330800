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
  // vLLM takes `prompt_embeds` in place of `prompt`.
  required: ['model'],
  anyOf: [{ required: ['prompt'] }, { required: ['prompt_embeds'] }],
  properties: {
    ...common,
    // 0 with `echo`: score the prompt, generate nothing (vLLM accepts it).
    max_tokens: { type: ['integer', 'null'], minimum: 0 },
    prompt_embeds: { type: ['string', 'array'] },
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
  // vLLM also embeds a chat conversation (`messages`, rendered by the chat template).
  required: ['model'],
  anyOf: [{ required: ['input'] }, { required: ['messages'] }],
  properties: {
    model: common.model,
    messages: chatCompletionBody.properties.messages,
    input: {
      anyOf: [
        { type: 'string' },
        { type: 'array', minItems: 1, items: { anyOf: [{ type: 'string' }, { type: 'integer' }, { type: 'array', items: { type: 'integer' } }] } },
      ],
    },
  },
} as const;

// vLLM's other routes (docs/serving.md lists them). Each names its model; the
// rest is read only for the facts (the prompt's text, max tokens) and passes through.
const text = { type: 'string' } as const;
const texts = { anyOf: [text, { type: 'array', maxItems: MAX_MESSAGES, items: {} }] } as const;
const messagesOrInput = { anyOf: [{ required: ['input'] }, { required: ['messages'] }, { required: ['prompt'] }] } as const;

/** The Responses API: `input` is a string or a list of items (messages, tool outputs, ...). */
export const responsesBody = {
  type: 'object',
  required: ['model'],
  properties: {
    model: common.model,
    input: { anyOf: [text, { type: 'array', maxItems: MAX_MESSAGES, items: { type: 'object' } }] },
    instructions: { type: ['string', 'null'] },
    max_output_tokens: { type: ['integer', 'null'], minimum: 1 },
    previous_response_id: { type: ['string', 'null'], minLength: 1, maxLength: 256 },
    stream: common.stream,
    store: { type: ['boolean', 'null'] },
  },
} as const;

/** Anthropic's Messages API as vLLM serves it: max_tokens is required there. */
export const messagesBody = {
  type: 'object',
  required: ['model', 'messages', 'max_tokens'],
  properties: {
    model: common.model,
    max_tokens: { type: 'integer', minimum: 1 },
    stream: common.stream,
    system: { type: ['string', 'array'], maxItems: MAX_CONTENT_PARTS },
    messages: chatCompletionBody.properties.messages,
  },
} as const;

const modelOnly = (extra: Record<string, unknown>, keywords?: object) => ({
  type: 'object',
  required: ['model'],
  ...keywords,
  properties: { model: common.model, ...extra },
});

export const tokenizeBody = modelOnly(
  { prompt: text, messages: chatCompletionBody.properties.messages },
  { anyOf: [{ required: ['prompt'] }, { required: ['messages'] }] },
);
export const detokenizeBody = modelOnly({ tokens: { type: 'array', maxItems: 1_000_000, items: { type: 'integer' } } }, { required: ['model', 'tokens'] });
export const rerankBody = modelOnly(
  { query: { type: ['string', 'object'] }, documents: texts, top_n: { type: ['integer', 'null'], minimum: 0 } },
  { required: ['model', 'query', 'documents'] },
);
export const scoreBody = modelOnly({ text_1: texts, text_2: texts, queries: texts, documents: texts, data_1: texts, data_2: texts });
export const poolingBody = modelOnly({ input: texts, messages: chatCompletionBody.properties.messages }, messagesOrInput);
export const classifyBody = modelOnly({ input: texts, messages: chatCompletionBody.properties.messages }, messagesOrInput);
/** The text fields of an audio request's form (the file itself is not JSON). */
export const audioBody = modelOnly({ prompt: text, language: text, response_format: text, stream: common.stream });

export type VllmEndpoint =
  | 'responses'
  | 'messages'
  | 'tokenize'
  | 'detokenize'
  | 'rerank'
  | 'score'
  | 'pooling'
  | 'classify'
  | 'transcriptions'
  | 'translations';

export type Endpoint = 'chat' | 'completions' | 'embeddings' | VllmEndpoint;

export const BODY_SCHEMAS: Record<Endpoint, object> = {
  chat: chatCompletionBody,
  completions: completionBody,
  embeddings: embeddingBody,
  responses: responsesBody,
  messages: messagesBody,
  tokenize: tokenizeBody,
  detokenize: detokenizeBody,
  rerank: rerankBody,
  score: scoreBody,
  pooling: poolingBody,
  classify: classifyBody,
  transcriptions: audioBody,
  translations: audioBody,
};
