// vLLM's pooling-model routes in their response shapes: rerank (/rerank,
// /v1/rerank, /v2/rerank), score (/score, /v1/score), classify (/classify,
// /v1/classify), pooling, and the audio routes (multipart, read with the
// platform's own form parser). Scores are word overlap: deterministic and
// plausible, not a model's.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { embed } from './embeddings.ts';
import { badRequest } from './errors.ts';
import { fillerText } from './filler.ts';
import { contentText, estimateTokens, renderChat } from './prompt.ts';
import type { ServedModels } from './served-models.ts';

type Body = Record<string, unknown>;

const id = (prefix: string) => `${prefix}-${randomUUID().replaceAll('-', '')}`;
const created = () => Math.floor(Date.now() / 1000);
const usage = (tokens: number) => ({ prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0, prompt_tokens_details: null });

function words(text: string): Set<string> {
  return new Set(
    text
      .toLowerCase()
      .split(/[^a-z0-9]+/)
      .filter(Boolean),
  );
}

/** Word overlap of two texts, in (0, 1). */
export function relevance(query: string, document: string): number {
  const a = words(query);
  const b = words(document);
  let shared = 0;
  for (const w of a) if (b.has(w)) shared++;
  const union = a.size + b.size - shared;
  return 0.02 + 0.96 * (union === 0 ? 0 : shared / union);
}

function texts(value: unknown, field: string): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value) && value.length > 0) return value.map((v) => (typeof v === 'string' ? v : contentText((v as Body)?.text ?? (v as Body)?.content)));
  throw badRequest(`\`${field}\` must be a string or a non-empty list`, field);
}

function inputs(body: Body): string[] {
  if (Array.isArray(body.messages)) return [renderChat(body.messages as { role: string; content?: unknown }[])];
  return texts(body.input ?? body.prompt, 'input');
}

export function registerPoolingRoutes(app: FastifyInstance, models: ServedModels, servedName: string): void {
  const modelOf = (body: Body) => {
    const model = typeof body.model === 'string' ? body.model : undefined;
    models.resolve(model);
    return model ?? servedName;
  };

  const rerank = async (request: { body: unknown }) => {
    const body = request.body as Body;
    const model = modelOf(body);
    if (typeof body.query !== 'string') throw badRequest('`query` must be a string', 'query');
    const documents = texts(body.documents, 'documents');
    const ranked = documents
      .map((text, index) => ({ index, document: { text }, relevance_score: relevance(body.query as string, text) }))
      .sort((x, y) => y.relevance_score - x.relevance_score);
    const topN = typeof body.top_n === 'number' && body.top_n > 0 ? body.top_n : ranked.length;
    const tokens = documents.reduce((sum, d) => sum + estimateTokens(body.query as string) + estimateTokens(d), 0);
    return { id: id('rerank'), model, usage: { total_tokens: tokens }, results: ranked.slice(0, topN) };
  };
  for (const path of ['/rerank', '/v1/rerank', '/v2/rerank']) app.post(path, rerank);

  const score = async (request: { body: unknown }) => {
    const body = request.body as Body;
    const model = modelOf(body);
    const first = texts(body.text_1 ?? body.queries ?? body.data_1, 'text_1');
    const second = texts(body.text_2 ?? body.documents ?? body.data_2, 'text_2');
    if (first.length !== 1 && first.length !== second.length) throw badRequest('`text_1` must be one text or as many as `text_2`', 'text_1');
    const data = second.map((text, index) => ({ index, object: 'score', score: relevance(first.length === 1 ? first[0] : first[index], text) }));
    const tokens = second.reduce((sum, t, i) => sum + estimateTokens(first[first.length === 1 ? 0 : i]) + estimateTokens(t), 0);
    return { id: id('score'), object: 'list', created: created(), model, data, usage: usage(tokens) };
  };
  for (const path of ['/score', '/v1/score']) app.post(path, score);

  const classify = async (request: { body: unknown }) => {
    const body = request.body as Body;
    const model = modelOf(body);
    const all = inputs(body);
    const data = all.map((text, index) => {
      const p = 0.1 + 0.8 * ((embed(text, 2)[0] + 1) / 2);
      return { index, label: p >= 0.5 ? 'LABEL_1' : 'LABEL_0', probs: [1 - p, p], num_classes: 2 };
    });
    return { id: id('classify'), object: 'list', created: created(), model, data, usage: usage(all.reduce((s, t) => s + estimateTokens(t), 0)) };
  };
  for (const path of ['/classify', '/v1/classify']) app.post(path, classify);

  app.post('/pooling', async (request) => {
    const body = request.body as Body;
    const model = modelOf(body);
    const all = inputs(body);
    return {
      id: id('pool'),
      object: 'list',
      created: created(),
      model,
      data: all.map((text, index) => ({ index, object: 'pooling', data: embed(text) })),
      usage: usage(all.reduce((s, t) => s + estimateTokens(t), 0)),
    };
  });

  // Audio arrives as multipart/form-data: read with the platform's own parser (undici's FormData).
  app.addContentTypeParser('multipart/form-data', { parseAs: 'buffer' }, async (request: { headers: Record<string, unknown> }, bytes: Buffer) => {
    const form = await new Response(new Uint8Array(bytes), { headers: { 'content-type': String(request.headers['content-type']) } }).formData();
    const body: Body = {};
    for (const [name, value] of form) body[name] = typeof value === 'string' ? value : { size: value.size, name: (value as File).name };
    return body;
  });
  const transcribe = async (request: { body: unknown }) => {
    const body = request.body as Body;
    modelOf(body);
    const file = body.file as { size: number } | undefined;
    if (!file || typeof file !== 'object') throw badRequest('`file` is required: the audio, as a multipart file part', 'file');
    // About one word for every 4 KB of audio, at least one.
    const text = fillerText(Math.max(1, Math.min(512, Math.round(file.size / 4096)))).trim();
    return body.response_format === 'text' ? text : { text, usage: { type: 'duration', seconds: Math.max(1, Math.round(file.size / 32_000)) } };
  };
  app.post('/v1/audio/transcriptions', transcribe);
  app.post('/v1/audio/translations', transcribe);
}
