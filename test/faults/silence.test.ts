// Silence: a replica that accepts non-streaming requests and never answers
// them, behind a long time-to-headers timeout (as in production: minutes),
// with clients that give up long before it. It must be ejected within three
// lost requests, from its peers' latency, not from its own timeout. A
// legitimately long generation (time to headers grows with max_tokens) must
// not be mistaken for silence. And a client that never reads its stream must
// not keep the engine's request open.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { TEST_KEY, until } from '../helpers/router.ts';
import { openSocket } from '../hostile/raw-http.ts';
import { faultFleet, requestId, type FaultFleet } from './harness.ts';

const LONG_HEADERS_TIMEOUT = { headers_timeout_ms: 120_000, stream_headers_timeout_ms: 120_000 };

/** Workers sending non-streaming chats in a loop (client timeout `timeoutMs`) until `stop()` says so; errors counted. */
async function traffic(fleet: FaultFleet, workers: number, timeoutMs: number, stop: () => boolean, maxTokens: () => number = () => 3) {
  const client = new OpenAI({ baseURL: `${fleet.t.url}/v1`, apiKey: TEST_KEY, maxRetries: 0, timeout: timeoutMs });
  let ok = 0;
  const lost: string[] = [];
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (!stop()) {
        const id = requestId('silence');
        try {
          const completion = await client.chat.completions.create(
            { model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens() },
            { headers: { 'x-request-id': id } },
          );
          assert.match(completion.choices[0].message.content ?? '', /from good\d/);
          ok++;
        } catch (error) {
          lost.push(`${id}: ${(error as Error).message}`);
        }
      }
    }),
  );
  return { ok, lost };
}

test('a replica that never answers non-streaming requests is ejected for silence within 3 lost requests, long before its timeout', async () => {
  const fleet = await faultFleet(['good1', 'good2', 'hung'], { upstream: LONG_HEADERS_TIMEOUT });
  try {
    const hung = fleet.engine('hung');
    hung.fault = 'hang_unary';
    const started = Date.now();
    const state = () => fleet.t.router.fleet.replica('hung')!.health;
    let after = 0;
    // 8 s client timeout (the issue's); the engine's own timeout is 120 s.
    const run = traffic(fleet, 4, 8000, () => (state() === 'ejected' && ++after > 40) || Date.now() - started > 60_000);
    const { ok, lost } = await run;
    assert.equal(state(), 'ejected', `ejected (${ok} answered, lost: ${lost.join('; ')})`);
    const report = fleet.t.router.fleet.list().find((r) => r.id === 'hung') as unknown as { ejection: { cause: string; detail: string } };
    assert.equal(report.ejection.cause, 'silence');
    assert.match(report.ejection.detail, /peers answered/);
    assert.ok(lost.length <= 3, `at most 3 requests lost, not ${lost.length}: ${lost.join('; ')}`);
    assert.ok(Date.now() - started < 30_000, `ejected in ${Date.now() - started} ms, far inside the 120 s timeout`);
    // Streams to it still work (it hangs only non-streaming ones): silence is about the kind it fails.
    const metrics = await (await fetch(`${fleet.t.adminUrl}/metrics`)).text();
    assert.match(metrics, /switchyard_replica_ejections_total\{pool="tiny@v1\/general",replica="hung",cause="silence"\} 1/);
  } finally {
    await fleet.close();
  }
});

test('a long generation (time to headers grows with max_tokens) is not taken for silence', async () => {
  const fleet = await faultFleet(['good1', 'good2', 'good3'], { upstream: LONG_HEADERS_TIMEOUT });
  try {
    for (const engine of fleet.engines.values()) engine.msPerToken = 20;
    // Short answers first (60 ms each): the peers' latency the deadline comes from.
    let shortOnes = 0;
    await traffic(fleet, 3, 20_000, () => ++shortOnes > 40);
    // Then long ones (150 tokens: 3 s, 50 times a short one) alongside more short ones.
    let longOnes = 0;
    let moreShort = 0;
    const [long, short] = await Promise.all([
      traffic(
        fleet,
        3,
        20_000,
        () => ++longOnes > 6,
        () => 150,
      ),
      traffic(fleet, 2, 20_000, () => ++moreShort > 60),
    ]);
    assert.deepEqual([...long.lost, ...short.lost], [], 'nothing lost');
    for (const r of fleet.t.router.fleet.list()) assert.notEqual(r.health, 'ejected', `${r.id} not ejected`);
  } finally {
    await fleet.close();
  }
});

test('a client that stops reading its stream has it aborted after the send timeout, upstream too', async () => {
  const fleet = await faultFleet(['good1'], { limits: { sendTimeoutMs: 300 } });
  try {
    const engine = fleet.engine('good1');
    engine.chunkPadBytes = 64 * 1024;
    engine.chunkEveryMs = 1;
    const id = requestId('stalled');
    const socket = await openSocket(fleet.t.url);
    socket.on('error', () => {});
    const body = JSON.stringify({ model: 'tiny', stream: true, max_tokens: 3000, messages: [{ role: 'user', content: 'hi' }] });
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nx-request-id: ${id}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    socket.pause(); // and never read
    // 3000 chunks of 64 KiB (~190 MB) would take seconds at least; the stall ends it first.
    await until(() => engine.cutOff.includes(id), 20_000, 'the engine request to be aborted');
    // The router closed its side: a reader that wakes up finds the end (a paused socket cannot see it).
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.resume();
    await closed;
    // A client that reads gets the same long stream whole.
    engine.chunkPadBytes = 1024;
    const events = await fleet.t.client.chat.completions.create({ model: 'tiny', stream: true, max_tokens: 200, messages: [{ role: 'user', content: 'hi' }] });
    let n = 0;
    for await (const event of events) if (event.choices[0]?.delta.content) n++;
    assert.equal(n, 200);
  } finally {
    await fleet.close();
  }
});
