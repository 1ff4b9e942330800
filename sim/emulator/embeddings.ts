// /v1/embeddings: a small deterministic unit vector per input, enough for a
// client or router test to see the endpoint's shape and stable values. It
// bypasses the engine model: an embedding is one prefill, no decode.
import { hashString } from '../../sdk/hashing.ts';
import { estimateTokens } from './prompt.ts';

export const EMBEDDING_DIMENSIONS = 32;

export function embed(text: string, dimensions = EMBEDDING_DIMENSIONS): number[] {
  const vector = new Array<number>(dimensions);
  let norm = 0;
  for (let i = 0; i < dimensions; i++) {
    const value = hashString(text, i + 1) / 0x8000_0000 - 1;
    vector[i] = value;
    norm += value * value;
  }
  norm = Math.sqrt(norm) || 1;
  for (let i = 0; i < dimensions; i++) vector[i] /= norm;
  return vector;
}

export function embeddingResponse(id: string, model: string, inputs: readonly string[], encoding: 'float' | 'base64'): object {
  const promptTokens = inputs.reduce((sum, text) => sum + estimateTokens(text), 0);
  return {
    id,
    object: 'list',
    created: Math.floor(Date.now() / 1000),
    model,
    data: inputs.map((text, index) => {
      const vector = embed(text);
      const embedding = encoding === 'float' ? vector : Buffer.from(new Float32Array(vector).buffer).toString('base64');
      return { index, object: 'embedding', embedding };
    }),
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens, completion_tokens: 0, prompt_tokens_details: null },
  };
}
