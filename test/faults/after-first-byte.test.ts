// Faults after the engine's first byte went out: never retried (no request
// reaches a second engine), and never a hang. A stream ends with whole events,
// one OpenAI-shaped error event and a clean end, without the engine's length
// or hop-by-hop headers; a non-streaming body cut short ends the connection.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { APIError } from 'openai';
import { TEST_KEY, until } from '../helpers/router.ts';
import type { Fault } from './fault-engine.ts';
import { faultFleet, requestId, type FaultFleet } from './harness.ts';

const BOUND_MS = 4000;
const EJECT_FAST = 'outlier_detection: { consecutive_5xx: 2, consecutive_gateway_failures: 2, base_ejection_ms: 60000 }';

/** A raw POST through the router, sent until the faulty engine takes one (round-robin): the ids it reached are then known. */
async function hitBad(fleet: FaultFleet, stream: boolean): Promise<{ id: string; response: Response; started: number }> {
  for (let i = 0; i < 6; i++) {
    const id = requestId('cut');
    const started = performance.now();
    const response = await fetch(`${fleet.t.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_KEY}`, 'x-request-id': id },
      body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5, stream }),
    });
    if (fleet.engine('bad').hits(id)) return { id, response, started };
    await response.arrayBuffer();
  }
  throw new Error('round-robin never sent a request to the faulty engine');
}

/**
 * A fleet of a good and a faulty engine, and a long stream on the good one
 * meanwhile (round-robin's first pick is the first replica): it must arrive
 * whole whatever happens to the other.
 */
async function withFleet(fault: Fault, run: (fleet: FaultFleet) => Promise<void>): Promise<void> {
  const fleet = await faultFleet(['good', 'bad'], { settings: [EJECT_FAST] });
  fleet.engine('bad').fault = fault;
  fleet.engine('good').chunkEveryMs = 15;
  try {
    const longId = requestId('long');
    const long = fleet.t.client.chat.completions.create(
      { model: 'tiny', messages: [{ role: 'user', content: 'a long one' }], max_tokens: 40, stream: true },
      { headers: { 'x-request-id': longId } },
    );
    const text = (async () => {
      let all = '';
      for await (const event of await long) all += event.choices[0]?.delta.content ?? '';
      return all;
    })();
    await until(() => fleet.reached(longId).length > 0, 3000, 'the long stream to start');
    await run(fleet);
    assert.deepEqual(
      (await text).trim().split(' '),
      Array.from({ length: 40 }, (_, k) => `good:${k}`),
      'the stream on the healthy replica arrived whole',
    );
    assert.deepEqual(fleet.reached(longId), ['good']);
  } finally {
    await fleet.close();
  }
}

/** The faulty replica is ejected after its second broken request, and traffic moves. */
async function ejectedAfterTwo(fleet: FaultFleet, stream: boolean): Promise<void> {
  const { response } = await hitBad(fleet, stream);
  await response.arrayBuffer().catch(() => undefined);
  await until(() => fleet.t.router.fleet.replica('bad')!.health === 'ejected', 3000, 'bad to be ejected');
  const seen = fleet.engine('bad').seen.length;
  for (let i = 0; i < 3; i++) {
    const ok = await fleet.t.client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 });
    assert.equal(ok.choices[0].message.content, 'from good');
  }
  assert.equal(fleet.engine('bad').seen.length, seen, 'no traffic to the ejected replica');
}

test('dies mid-stream: whole events, one error event, a clean end; never retried; ejected', async () => {
  await withFleet('die_mid_stream', async (fleet) => {
    fleet.engine('bad').cutAfterChunks = 2;
    const { id, response, started } = await hitBad(fleet, true);
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('content-length'), null);
    assert.equal(response.headers.get('transfer-encoding'), 'chunked');
    const body = await response.text(); // ends cleanly: no throw, no hang
    assert.ok(performance.now() - started < BOUND_MS);
    const events = body.split('\n\n').filter(Boolean);
    assert.equal(events.length, 3, `two whole events and the error: ${JSON.stringify(body)}`);
    for (const event of events) assert.match(event, /^data: \{/);
    const parsed = events.map((e) => JSON.parse(e.slice('data: '.length)));
    assert.deepEqual(
      parsed.slice(0, 2).map((e) => e.choices[0].delta.content),
      ['bad:0 ', 'bad:1 '],
    );
    assert.equal(parsed[2].error.code, 'upstream_error');
    assert.deepEqual(Object.keys(parsed[2].error).sort(), ['code', 'message', 'param', 'type']);
    assert.deepEqual(fleet.reached(id), ['bad'], 'no second engine after the first byte');

    // The official client sees an APIError, not a hang or a garbled chunk.
    let chunks = 0;
    const cut = async () => {
      for (let i = 0; i < 6; i++) {
        const stream = await fleet.t.client.chat.completions.create({
          model: 'tiny',
          messages: [{ role: 'user', content: 'hi' }],
          max_tokens: 5,
          stream: true,
        });
        chunks = 0;
        for await (const _ of stream) chunks++;
      }
    };
    await assert.rejects(cut(), (e: unknown) => e instanceof APIError && /failed mid-way/.test(e.message));
    assert.equal(chunks, 2);
    await until(() => fleet.t.router.fleet.replica('bad')!.health === 'ejected', 3000, 'bad to be ejected');
  });
});

test('half a body on a stream (content-length 1000, then 20 bytes): no length passed on, one error event, a clean end', async () => {
  await withFleet('half_body', async (fleet) => {
    const { id, response, started } = await hitBad(fleet, true);
    assert.equal(response.headers.get('content-length'), null, "the engine's length is not passed on");
    const body = await response.text();
    assert.ok(performance.now() - started < BOUND_MS, 'not a hang');
    const events = body.split('\n\n').filter(Boolean);
    assert.equal(events.length, 2);
    assert.equal(events[0], 'data: {"choices":[]}');
    assert.equal(JSON.parse(events[1].slice('data: '.length)).error.type, 'server_error');
    assert.deepEqual(fleet.reached(id), ['bad']);
    await ejectedAfterTwo(fleet, true);
  });
});

test('half a body without streaming: the connection ends, the client sees an error, not a hang', async () => {
  await withFleet('half_body', async (fleet) => {
    const { id, response, started } = await hitBad(fleet, false);
    assert.equal(response.status, 200);
    await assert.rejects(response.text(), 'the body read fails');
    assert.ok(performance.now() - started < BOUND_MS, `ended after ${Math.round(performance.now() - started)} ms`);
    assert.deepEqual(fleet.reached(id), ['bad']);
    await ejectedAfterTwo(fleet, false);
  });
});

test('half a body, then silence: cut after the idle timeout, not a hang', async () => {
  await withFleet('half_body_hang', async (fleet) => {
    const { id, response, started } = await hitBad(fleet, false);
    await assert.rejects(response.text());
    const ms = performance.now() - started;
    assert.ok(ms >= 350 && ms < BOUND_MS, `ended after ${Math.round(ms)} ms (body idle timeout 400 ms)`);
    assert.deepEqual(fleet.reached(id), ['bad']);
    await ejectedAfterTwo(fleet, false);
  });
});

test('a stream that goes silent mid-way ends with an error event after the idle timeout', async () => {
  await withFleet('half_body_hang', async (fleet) => {
    const { id, response, started } = await hitBad(fleet, true);
    const body = await response.text();
    const ms = performance.now() - started;
    assert.ok(ms >= 350 && ms < BOUND_MS, `ended after ${Math.round(ms)} ms (stream idle timeout 400 ms)`);
    const events = body.split('\n\n').filter(Boolean);
    assert.equal(JSON.parse(events.at(-1)!.slice('data: '.length)).error.code, 'upstream_timeout');
    assert.deepEqual(fleet.reached(id), ['bad']);
  });
});

test("a stream's hop-by-hop headers stay with the engine; its own headers pass", async () => {
  const fleet = await faultFleet(['good']);
  try {
    fleet.engine('good').streamHeaders = { connection: 'keep-alive, x-hop', 'x-hop': 'engine-only', 'keep-alive': 'timeout=5', 'x-engine': 'vllm' };
    const response = await fetch(`${fleet.t.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_KEY}` },
      body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, stream: true }),
    });
    assert.equal(response.headers.get('transfer-encoding'), 'chunked', "the router's own framing");
    assert.equal(response.headers.get('x-hop'), null, "named by the engine's Connection header");
    assert.notEqual(response.headers.get('keep-alive'), 'timeout=5');
    assert.equal(response.headers.get('x-engine'), 'vllm');
    const body = await response.text();
    assert.ok(body.endsWith('data: [DONE]\n\n'), 'whole');
  } finally {
    await fleet.close();
  }
});
