// The Responses API through three real routers in front of three emulated
// engines that, like vLLM, keep each stored response in their own memory: a
// conversation continued through each router in turn reaches the engine that
// holds its previous response every time, with no traffic between routers.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createOpenAI } from '@ai-sdk/openai';
import OpenAI from 'openai';
import { createEnv } from '../../core/decide/env.ts';
import { fixedPolicy } from '../../core/serve/fixed-policy.ts';
import { startRouter, type Router } from '../../core/serve/server.ts';
import { startEmulator, type Emulator } from '../../sim/emulator/server.ts';
import { policyFrom } from '../helpers/core.ts';
import { FULL_HEADERS_SETTINGS, json, OPEN_TENANTS, TEST_KEY, TINY_MODELS } from '../helpers/router.ts';

let engines: Emulator[] = [];
const routers: Router[] = [];
const clients: OpenAI[] = [];

function files(urls: readonly string[], ids: readonly number[] = [0, 1, 2]): Record<string, string> {
  const replicas = ids.map((i) => `      - { id: e${i}, url: "${urls[i]}" }`).join('\n');
  return {
    'models.yaml': TINY_MODELS,
    'tenants.yaml': OPEN_TENANTS,
    'settings.yaml': FULL_HEADERS_SETTINGS,
    // power-of-two alone picks at random: without the response id, turns would scatter.
    'pools.yaml': `kind: pools\npools:\n  - name: general\n    model: tiny\n    version: v1\n    strategies: [power-of-two]\n    replicas:\n${replicas}\n`,
  };
}

async function router(policyFiles: Record<string, string>, seed: number): Promise<{ router: Router; client: OpenAI }> {
  const r = await startRouter({
    policy: fixedPolicy(policyFrom(policyFiles, seed)),
    port: 0,
    logger: false,
    admin: { port: 0 },
    env: createEnv({ seed }),
    scrapeIntervalMs: 50,
    healthIntervalMs: 50,
  });
  routers.push(r);
  return { router: r, client: new OpenAI({ baseURL: `${r.url}/v1`, apiKey: TEST_KEY, maxRetries: 0, timeout: 20_000 }) };
}

before(async () => {
  engines = await Promise.all([0, 1, 2].map(() => startEmulator({ profile: 'tiny', speed: 20, host: '127.0.0.1', servedModelName: 'tiny' })));
  for (let i = 0; i < 3; i++) clients.push((await router(files(engines.map((e) => e.url)), 100 + i)).client);
});
after(async () => {
  await Promise.all(routers.map((r) => r.close(1000)));
  await Promise.all(engines.map((e) => e.close()));
});

test('a conversation continued through each of three routers reaches the engine that stored each response', async () => {
  const first = await clients[0].responses.create({ model: 'tiny', input: 'Plan a trip to Lisbon', max_output_tokens: 8 });
  assert.equal(first.object, 'response');
  assert.equal(first.status, 'incomplete'); // max_output_tokens reached, as vLLM reports it
  assert.ok(first.output_text.length > 0);
  assert.match(first.id, /^resp_/);
  let previous = first;
  let previousInput = first.usage!.input_tokens;
  for (const [turn, client] of [clients[1], clients[2], clients[0], clients[1]].entries()) {
    // The engine answers 404 for an id it does not hold: every turn landing proves the routing.
    const next = await client.responses.create({ model: 'tiny', input: `And on day ${turn + 2}?`, previous_response_id: previous.id, max_output_tokens: 6 });
    assert.equal(next.previous_response_id, previous.id);
    assert.ok(next.usage!.input_tokens > previousInput, 'the engine prepended the stored conversation');
    previousInput = next.usage!.input_tokens;
    previous = next;
  }
});

test('a streamed follow-up through another router, event by event as vLLM sends them', async () => {
  const first = await clients[2].responses.create({ model: 'tiny', input: 'Name three rivers', max_output_tokens: 5 });
  const stream = await clients[0].responses.create({
    model: 'tiny',
    input: 'And three lakes',
    previous_response_id: first.id,
    max_output_tokens: 7,
    stream: true,
  });
  const types: string[] = [];
  let text = '';
  let completed;
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === 'response.output_text.delta') text += event.delta;
    if (event.type === 'response.completed' || event.type === 'response.incomplete') completed = event.response;
  }
  assert.equal(types[0], 'response.created');
  assert.ok(types.includes('response.output_text.delta'));
  assert.ok(completed, `a final event among ${types.join(', ')}`);
  assert.equal(completed.output_text ?? text, text);
  assert.equal(completed.previous_response_id, first.id);
  // The next turn continues the streamed response, through the third router.
  const third = await clients[1].responses.create({ model: 'tiny', input: 'Thanks', previous_response_id: completed.id, max_output_tokens: 3 });
  assert.equal(third.previous_response_id, completed.id);
});

test('the follow-up decision is traced: the replica holding the previous response, and why', async () => {
  const first = await clients[0].responses.create({ model: 'tiny', input: 'Hello there', max_output_tokens: 3 }).withResponse();
  const home = first.response.headers.get('x-switchyard-replica');
  const second = await clients[1].responses.create({ model: 'tiny', input: 'Again', previous_response_id: first.data.id, max_output_tokens: 3 }).withResponse();
  assert.equal(second.response.headers.get('x-switchyard-replica'), home);
  assert.equal(second.response.headers.get('x-switchyard-reason'), 'stored-response: it holds the response named by previous_response_id');
  const decision = await json(await fetch(`${routers[1].adminUrl}/admin/decisions/${second.response.headers.get('x-request-id')}`));
  assert.equal(decision.trace.replica.decidedBy, 'stored response');
  assert.equal(decision.replica, home);
});

test('a follow-up reaches its engine even while that replica is drained', async () => {
  const first = await clients[0].responses.create({ model: 'tiny', input: 'Keep going', max_output_tokens: 3 }).withResponse();
  const home = first.response.headers.get('x-switchyard-replica')!;
  const drain = (draining: boolean) =>
    fetch(`${routers[1].adminUrl}/admin/replicas/${home}/drain`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ draining }),
    });
  assert.equal((await drain(true)).status, 200);
  try {
    const next = await clients[1].responses.create({ model: 'tiny', input: 'More', previous_response_id: first.data.id, max_output_tokens: 3 }).withResponse();
    assert.equal(next.response.headers.get('x-switchyard-replica'), home);
    // New conversations avoid it.
    for (let i = 0; i < 4; i++) {
      const fresh = await clients[1].responses.create({ model: 'tiny', input: `New ${i}`, max_output_tokens: 2 }).withResponse();
      assert.notEqual(fresh.response.headers.get('x-switchyard-replica'), home);
    }
  } finally {
    await drain(false);
  }
});

test('when the engine that stored a response is gone from the policy, the router answers 404 as vLLM does', async () => {
  const first = await clients[0].responses.create({ model: 'tiny', input: 'Remember this', max_output_tokens: 3 }).withResponse();
  const home = Number(first.response.headers.get('x-switchyard-replica')!.slice(1));
  const others = [0, 1, 2].filter((i) => i !== home);
  const { client } = await router(
    files(
      engines.map((e) => e.url),
      others,
    ),
    7,
  );
  const error = await client.responses
    .create({ model: 'tiny', input: 'Still there?', previous_response_id: first.data.id, max_output_tokens: 3 })
    .catch((e: unknown) => e);
  assert.ok(error instanceof OpenAI.NotFoundError, String(error));
  assert.match(error.message, /Response with id '.+' not found\. .*without previous_response_id/);
  // A new conversation through that router still works.
  const fresh = await client.responses.create({ model: 'tiny', input: 'Start over', max_output_tokens: 3 });
  assert.equal(fresh.status, 'incomplete');
});

test('an id no router made goes where the strategies send it; the engine answers 404 for it', async () => {
  const error = await clients[0].responses
    .create({ model: 'tiny', input: 'x', previous_response_id: 'resp_0123456789abcdef', max_output_tokens: 3 })
    .catch((e: unknown) => e);
  assert.ok(error instanceof OpenAI.NotFoundError, String(error));
  assert.match(error.message, /Response with id 'resp_0123456789abcdef' not found/);
});

test("the AI SDK's default OpenAI model factory (which posts to /v1/responses) works through the router", async () => {
  const model = createOpenAI({ baseURL: `${routers[0].url}/v1`, apiKey: TEST_KEY })('tiny');
  const result = await model.doGenerate({ prompt: [{ role: 'user', content: [{ type: 'text', text: 'Say something' }] }], maxOutputTokens: 5 });
  const text = result.content.map((part) => (part.type === 'text' ? part.text : '')).join('');
  assert.ok(text.length > 0, JSON.stringify(result.content));
  assert.equal(result.usage.outputTokens.total, 5);
  const streamed = await model.doStream({ prompt: [{ role: 'user', content: [{ type: 'text', text: 'Stream something' }] }], maxOutputTokens: 4 });
  let deltas = '';
  for await (const part of streamed.stream as unknown as AsyncIterable<{ type: string; delta?: string }>) if (part.type === 'text-delta') deltas += part.delta;
  assert.ok(deltas.length > 0);
});
