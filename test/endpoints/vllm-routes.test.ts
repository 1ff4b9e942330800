// vLLM's other routes through the real router, each decided (model, pool,
// replica, admission), traced in the decision log, and answered by an
// emulated engine in vLLM's shapes: Anthropic Messages through Anthropic's
// own client, audio through openai's multipart upload, rerank, score,
// classify, pooling and tokenize as raw HTTP.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { toFile } from 'openai';
import { FULL_HEADERS_SETTINGS, json, OPEN_TENANTS, startTestRouter, TEST_KEY, TINY_MODELS, tinyPool, type TestRouter } from '../helpers/router.ts';

let t: TestRouter;
let anthropic: Anthropic;
before(async () => {
  t = await startTestRouter({
    'models.yaml': TINY_MODELS,
    'tenants.yaml': OPEN_TENANTS,
    'pools.yaml': tinyPool({ replicas: 2 }),
    'settings.yaml': `${FULL_HEADERS_SETTINGS}audio_body_limit_bytes: 65536\n`,
  });
  anthropic = new Anthropic({ baseURL: t.url, apiKey: TEST_KEY, maxRetries: 0, timeout: 20_000 });
});
after(() => t.close());

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${t.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_KEY}`, ...headers },
    body: JSON.stringify(body),
  });

async function decisionOf(response: Response) {
  const id = response.headers.get('x-request-id')!;
  return json(await fetch(`${t.adminUrl}/admin/decisions/${id}`));
}

test("Anthropic Messages through the router with Anthropic's client, streaming and not", async () => {
  const message = await anthropic.messages.create({ model: 'tiny', max_tokens: 6, system: 'Be brief.', messages: [{ role: 'user', content: 'Hello' }] });
  assert.equal(message.type, 'message');
  assert.equal(message.stop_reason, 'max_tokens');
  assert.equal(message.usage.output_tokens, 6);
  assert.ok(message.content[0].type === 'text' && message.content[0].text.length > 0);

  const stream = anthropic.messages.stream({ model: 'tiny', max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'text', text: 'Count' }] }] });
  const events: string[] = [];
  for await (const event of stream) events.push(event.type);
  const final = await stream.finalMessage();
  assert.equal(events[0], 'message_start');
  assert.equal(events.at(-1), 'message_stop');
  assert.equal(final.usage.output_tokens, 5);
  assert.ok(final.content[0].type === 'text' && final.content[0].text.length > 0);
});

test("Messages errors are in Anthropic's shape: a missing max_tokens, an unknown model", async () => {
  const missing = await post('/v1/messages', { model: 'tiny', messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(missing.status, 400);
  const body = await missing.json();
  assert.equal(body.type, 'error');
  assert.equal(body.error.type, 'invalid_request_error');
  assert.match(body.error.message, /max_tokens/);
  const unknown = await anthropic.messages
    .create({ model: 'no-such-model', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] })
    .catch((e: unknown) => e);
  assert.ok(unknown instanceof Anthropic.NotFoundError, String(unknown));
  assert.equal((unknown.error as { type: string; error: { type: string } }).error.type, 'not_found_error');
});

test("rerank on all three paths, score, classify and pooling: decided, traced and answered in vLLM's shapes", async () => {
  for (const path of ['/v1/rerank', '/rerank', '/v2/rerank']) {
    const response = await post(path, {
      model: 'tiny',
      query: 'router fleet',
      documents: ['a cat sat', 'the router sends to the fleet', 'fleet of ships at sea'],
      top_n: 2,
    });
    assert.equal(response.status, 200, path);
    const body = await response.json();
    assert.equal(body.results.length, 2);
    assert.equal(body.results[0].index, 1, 'most relevant first');
    const decision = await decisionOf(response);
    assert.equal(decision.status, 200);
    assert.equal(decision.trace.admit.decidedBy, 'admitted');
    assert.match(decision.replica, /^r[01]$/);
  }
  const score = await post('/v1/score', { model: 'tiny', text_1: 'router', text_2: ['router fleet', 'cats'] });
  const scored = await score.json();
  assert.equal(scored.object, 'list');
  assert.ok(scored.data[0].score > scored.data[1].score);
  assert.equal((await post('/score', { model: 'tiny', text_1: 'a', text_2: 'a' })).status, 200);
  for (const path of ['/classify', '/v1/classify']) {
    const classified = await (await post(path, { model: 'tiny', input: ['good', 'bad'] })).json();
    assert.equal(classified.data.length, 2);
    assert.equal(classified.data[0].num_classes, 2);
  }
  const pooled = await (await post('/pooling', { model: 'tiny', input: 'pool me' })).json();
  assert.equal(pooled.data[0].object, 'pooling');
});

test("tokenize and detokenize are decided and sent to the model's replica", async () => {
  for (const [path, body] of [
    ['/tokenize', { model: 'tiny', prompt: 'Hello world' }],
    ['/detokenize', { model: 'tiny', tokens: [1, 2, 3] }],
  ] as const) {
    const response = await post(path, body);
    const decision = await decisionOf(response);
    assert.equal(decision.status, 200, path);
    assert.match(response.headers.get('x-switchyard-replica') ?? '', /^r[01]$/, path);
  }
  const noModel = await post('/tokenize', { prompt: 'Hello' });
  assert.equal(noModel.status, 400);
  assert.match((await noModel.json()).error.message, /"model"/);
});

test('audio transcriptions and translations go up as multipart, bounded in size', async () => {
  const audio = await toFile(Buffer.alloc(20_000, 1), 'speech.wav', { type: 'audio/wav' });
  const transcription = await t.client.audio.transcriptions.create({ model: 'tiny', file: audio, language: 'en' });
  assert.ok(transcription.text.length > 0);
  const translation = await t.client.audio.translations.create({ model: 'tiny', file: await toFile(Buffer.alloc(8_000, 2), 'speech.wav') });
  assert.ok(translation.text.length > 0);
  const tooLarge = await t.client.audio.transcriptions
    .create({ model: 'tiny', file: await toFile(Buffer.alloc(100_000, 1), 'long.wav') })
    .catch((e: unknown) => e);
  assert.equal((tooLarge as { status?: number }).status, 413);
  const noModel = new FormData();
  noModel.append('file', new Blob([Buffer.alloc(100)]), 'a.wav');
  const refused = await fetch(`${t.url}/v1/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${TEST_KEY}` }, body: noModel });
  assert.equal(refused.status, 400);
  assert.match((await refused.json()).error.message, /"model"/);
});

test('valid vLLM requests are accepted: echo with max_tokens 0, prompt_embeds alone, chat-style embeddings', async () => {
  const echo = await t.client.completions.create({ model: 'tiny', prompt: 'Score this prompt', max_tokens: 0, echo: true } as never);
  assert.equal(echo.choices[0].text, 'Score this prompt');
  assert.equal(echo.usage?.completion_tokens, 0);
  const embeds = await post('/v1/completions', { model: 'tiny', prompt_embeds: 'AAAA', max_tokens: 2 });
  assert.equal(embeds.status, 200, 'the router passes prompt_embeds on');
  assert.equal((await embeds.json()).usage.completion_tokens, 2);
  const chatEmbedding = await post('/v1/embeddings', { model: 'tiny', messages: [{ role: 'user', content: 'embed this conversation' }] });
  assert.equal(chatEmbedding.status, 200);
  assert.equal((await chatEmbedding.json()).data.length, 1);
});

test('agent session headers name the conversation: x-claude-code-session-id keeps a session on one replica', async () => {
  for (const header of ['x-session-affinity', 'session-id', 'x-claude-code-session-id']) {
    const replicas = new Set<string | null>();
    for (let turn = 0; turn < 4; turn++) {
      const response = await post(
        '/v1/chat/completions',
        { model: 'tiny', messages: [{ role: 'user', content: `turn ${turn}` }], max_tokens: 1 },
        { [header]: `agent-${header}` },
      );
      replicas.add(response.headers.get('x-switchyard-replica'));
      await response.arrayBuffer();
    }
    assert.equal(replicas.size, 1, header);
    const decision = await decisionOf(
      await post('/v1/messages', { model: 'tiny', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] }, { [header]: `agent-${header}` }),
    );
    assert.equal(decision.replica, [...replicas][0], `${header} on /v1/messages`);
  }
});
