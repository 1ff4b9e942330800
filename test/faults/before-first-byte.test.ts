// Faults before the engine's first byte: the client never sees them. Each
// request that met the faulty replica is retried on another one (known from
// the engines' own hit counts, not inferred), in bounded time; the replica is
// taken out of rotation and traffic moves; a long stream on a healthy replica
// finishes intact meanwhile.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ReplicaHealth } from '../../core/fleet/types.ts';
import { until } from '../helpers/router.ts';
import type { Fault } from './fault-engine.ts';
import { faultFleet, requestId, type FaultFleet } from './harness.ts';

// Short on purpose: the test's timeouts are 400 ms (stream headers) and 700 ms
// (non-streaming headers); the bound leaves room for a loaded machine.
const BOUND_MS = 4000;
const EJECT_FAST = 'outlier_detection: { consecutive_5xx: 2, consecutive_gateway_failures: 2, base_ejection_ms: 60000 }';

interface Case {
  readonly fault: Fault | 'refuse';
  readonly stream: boolean;
  /** What takes the replica out: passive ejection, or failing health checks too. */
  readonly out: readonly ReplicaHealth[];
  /** How the retry metric names the failure. */
  readonly cause: 'connect' | 'timeout' | 'status_5xx' | 'protocol';
  /** The retried request waited at least this long (a timeout), ms. */
  readonly atLeastMs?: number;
}

const CASES: Case[] = [
  { fault: 'refuse', stream: false, cause: 'connect', out: ['failing', 'ejected'] },
  { fault: 'hang', stream: true, cause: 'timeout', out: ['ejected'], atLeastMs: 350 },
  { fault: 'hang', stream: false, cause: 'timeout', out: ['ejected'], atLeastMs: 600 },
  { fault: 'hang_all', stream: true, cause: 'timeout', out: ['failing', 'ejected'] },
  { fault: 'status_500', stream: false, cause: 'status_5xx', out: ['ejected'] },
  { fault: 'status_500', stream: true, cause: 'status_5xx', out: ['ejected'] },
  { fault: 'garbage', stream: false, cause: 'protocol', out: ['ejected'] },
  { fault: 'half_status_line', stream: true, cause: 'protocol', out: ['ejected'] },
  { fault: 'reset_after_read', stream: false, cause: 'protocol', out: ['ejected'] },
  { fault: 'slow_first_byte', stream: true, cause: 'timeout', out: ['ejected'], atLeastMs: 350 },
  // Dies before its first whole SSE event: nothing went out, so it is retried too.
  { fault: 'die_mid_stream', stream: true, cause: 'protocol', out: ['ejected'] },
];

/** One chat completion through the official client; its text, and which engine wrote it. */
async function ask(fleet: FaultFleet, id: string, stream: boolean, maxTokens = 3): Promise<{ text: string; ms: number }> {
  const started = performance.now();
  const params = { model: 'tiny', messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: maxTokens };
  const options = { headers: { 'x-request-id': id } };
  let text = '';
  if (stream) {
    const events = await fleet.t.client.chat.completions.create({ ...params, stream: true }, options);
    for await (const event of events) text += event.choices[0]?.delta.content ?? '';
  } else {
    const completion = await fleet.t.client.chat.completions.create(params, options);
    text = completion.choices[0].message.content ?? '';
  }
  return { text, ms: performance.now() - started };
}

const writer = (text: string) => /(good\d)/.exec(text)?.[1];

for (const c of CASES) {
  test(`${c.fault} (${c.stream ? 'stream' : 'non-streaming'}): retried on another replica, the replica is taken out, traffic moves`, async () => {
    const fleet = await faultFleet(['bad', 'good0', 'good1'], { settings: [EJECT_FAST], refusing: c.fault === 'refuse' ? ['bad'] : [] });
    try {
      const bad = fleet.engines.get('bad');
      if (bad) {
        bad.fault = c.fault as Fault;
        bad.cutAfterChunks = 0;
      }
      for (const good of ['good0', 'good1']) fleet.engine(good).chunkEveryMs = 15;
      // A long stream meanwhile: it must finish whole wherever it lands.
      const long = ask(fleet, requestId('long'), true, 30);

      const isOut = () => c.out.includes(fleet.t.router.fleet.replica('bad')!.health);
      let retried = 0;
      for (let i = 0; i < 12 && !isOut(); i++) {
        const id = requestId(c.fault);
        const { text, ms } = await ask(fleet, id, c.stream);
        const served = writer(text);
        assert.ok(served, `answered by a healthy replica: "${text}"`);
        assert.ok(ms < BOUND_MS, `answered in ${Math.round(ms)} ms`);
        const reached = fleet.reached(id);
        if (bad?.hits(id)) {
          // Deterministic: the faulty engine saw it once, then exactly the one that answered.
          assert.deepEqual(reached.sort(), ['bad', served].sort());
          assert.equal(bad.hits(id), 1);
          // It waited for its timeout, unless the replica was ejected meanwhile (by the long
          // stream's failure and another), which moves the requests waiting on it at once.
          if (c.atLeastMs && ms < c.atLeastMs)
            assert.equal(fleet.t.router.fleet.replica('bad')!.health, 'ejected', `waited for the timeout: ${Math.round(ms)} ms`);
          retried++;
        } else {
          assert.deepEqual(reached, [served], 'one engine, no retry needed');
        }
      }
      if (bad) {
        assert.ok(retried >= 1, 'the faulty replica met a request, which was retried');
        const metrics = await (await fetch(`${fleet.t.adminUrl}/metrics`)).text();
        assert.match(metrics, new RegExp(`switchyard_retries_total\\{pool="tiny@v1/general",cause="${c.cause}"\\} [1-9]`));
      }

      await until(isOut, 15_000, `bad to be out (${c.out.join(' or ')})`);
      const seenBefore = bad?.seen.length ?? 0;
      for (let i = 0; i < 3; i++) {
        const id = requestId('after');
        const { text } = await ask(fleet, id, c.stream);
        assert.deepEqual(fleet.reached(id), [writer(text)], 'straight to a healthy replica');
      }
      assert.equal(bad?.seen.length ?? 0, seenBefore, 'no more traffic to the faulty replica');

      const { text } = await long;
      const served = writer(text)!;
      assert.deepEqual(
        text.trim().split(' '),
        Array.from({ length: 30 }, (_, k) => `${served}:${k}`),
        'the long stream arrived whole, in order',
      );
    } finally {
      await fleet.close();
    }
  });
}
