// A request with the largest body the router takes by default, and a flood
// of multi-MB bodies from keyed clients, against a router in its own process
// (test/hostile/flood-router.ts): neither blocks the router's event loop for
// long (docs/reliability.md, "Large bodies"). Before, an 8 MB prompt of short
// words blocked it 100-200 ms (the token estimate walked every character in
// one turn), and eight clients' 2.9 MB bodies 94-141 ms (their parses ran in
// the same turn). The loop's own noise on a loaded machine is far above the
// 50 ms aim now and then, so each bound is on what most of the samples show:
// the least block of several requests one after another, and the lower
// quartile of the flood's quarter-second windows. A block the body itself
// causes shows in every request and in most windows, noise in some.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { FLOOD_KEY, KEYED_BODIES, post, startFloodRouter } from './floods-kit.ts';

/** The default body_limit_bytes (8 MiB), less room for the JSON around the prompt. */
const MAXIMAL_BODY_BYTES = 8 * 1024 * 1024 - 1024;
const REQUESTS = 5;
const FLOOD_MS = 3000;
const WINDOW_MS = 250;
/**
 * Generous: what these bodies blocked before was 100-300 ms, about 10 times a JSON.parse of an 8 MB body in
 * the same process at the same time; now the largest step of a body is about that one parse. A loaded machine
 * (the router's process descheduled, everything slower) raises the bound with the parse.
 */
const blockBoundMs = (parseMs: number) => Math.max(90, 3 * parseMs);
/**
 * Past this (4-8 times a quiet machine's 8-15 ms), the router's process is starved of CPU: its blocks are the
 * scheduler's, and only what it answered is checked.
 */
const OVERLOADED_PARSE_MS = 60;

const least = (values: number[]) => Math.min(...values);
const lowerQuartile = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 4)];

/** A chat whose prompt is one-letter words: the costliest text per character for anything that walks the prompt. */
function maximalBody(): string {
  const head = JSON.stringify({ model: 'bench-model', max_tokens: 1, messages: [{ role: 'user', content: '' }] });
  return JSON.stringify({ model: 'bench-model', max_tokens: 1, messages: [{ role: 'user', content: 'a '.repeat((MAXIMAL_BODY_BYTES - head.length) / 2) }] });
}

test('the largest default body, sent again and again, and a flood of 2.9 MB bodies each block the loop briefly', { timeout: 180_000 }, async (t) => {
  const router = await startFloodRouter();
  try {
    const body = maximalBody();
    assert.ok(Buffer.byteLength(body) <= MAXIMAL_BODY_BYTES);
    await router.report();
    // The machine's load, as a block of known size: measured before the requests, before the flood and during it.
    const parses = [await router.parseMs()];
    const blocks: number[] = [];
    for (let i = 0; i <= REQUESTS; i++) {
      await router.report();
      const status = await post(router.url, '/v1/chat/completions', body, '127.0.0.20', { authorization: `Bearer ${FLOOD_KEY}` }, 60_000);
      const { maxBlockMs } = await router.report();
      assert.equal(status, 200, 'the body is routed');
      if (i > 0) blocks.push(maxBlockMs); // the first warms the router up
    }

    parses.push(await router.parseMs());
    const windows: number[] = [];
    const ends = Date.now() + FLOOD_MS;
    const stop = () => Date.now() > ends;
    await router.report();
    const sampling = (async () => {
      for (let window = 0; !stop(); window++) {
        if (window === 4) parses.push(await router.parseMs());
        await new Promise((resolve) => setTimeout(resolve, WINDOW_MS));
        windows.push((await router.report()).maxBlockMs);
      }
    })();
    const [note] = await Promise.all([KEYED_BODIES.run(router.url, stop, '127.0.0.21'), sampling]);
    const bound = blockBoundMs(Math.max(...parses));
    console.log(
      `JSON.parse of 8 MB ${parses.map((p) => p.toFixed(0)).join(' / ')} ms, bound ${bound.toFixed(0)} ms; maximal body (${(body.length / 1e6).toFixed(1)} MB): blocks ${blocks.map((b) => b.toFixed(0)).join(' / ')} ms; ` +
        `${KEYED_BODIES.name}: window maxima ${windows.map((b) => b.toFixed(0)).join(' ')} ms | ${note ?? ''}`,
    );
    assert.ok(String(note).includes('200x'), `the flood's bodies are routed: ${note}`);
    if (Math.max(...parses) > OVERLOADED_PARSE_MS) {
      t.diagnostic(`the machine is too loaded to measure blocks (an 8 MB JSON.parse took ${Math.max(...parses).toFixed(0)} ms): bounds not checked`);
      return;
    }
    assert.ok(least(blocks) <= bound, `one maximal body: every request blocked over ${bound.toFixed(0)} ms (least ${least(blocks).toFixed(0)})`);
    assert.ok(
      lowerQuartile(windows) <= bound,
      `the flood: most windows blocked over ${bound.toFixed(0)} ms (lower quartile ${lowerQuartile(windows).toFixed(0)})`,
    );
    assert.equal(router.child.exitCode, null, 'the router is alive');
  } finally {
    await router.close();
  }
});

test('large bodies arriving together each get their own answer: routed, or the same 400 as a small one', { timeout: 60_000 }, async () => {
  const router = await startFloodRouter();
  try {
    const prompt = 'word '.repeat(130_000); // 650 KB: parsed in turns of its own, under the large-body bound
    const valid = JSON.stringify({ model: 'bench-model', max_tokens: 1, messages: [{ role: 'user', content: prompt }] });
    const truncated = valid.slice(0, -3);
    const deep = `{"model":"bench-model","messages":[{"role":"user","content":"${prompt}"}],"x":${'['.repeat(20_000)}${']'.repeat(20_000)}}`;
    const kinds = [valid, truncated, deep, valid, truncated, deep];
    const answers = await Promise.all(
      kinds.map(async (body) => {
        const r = await request(`${router.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${FLOOD_KEY}` },
          body,
        });
        return { status: r.statusCode, body: (await r.body.json()) as { error?: { message: string; type: string; code: unknown; param: unknown } } };
      }),
    );
    for (const [i, answer] of answers.entries()) {
      const kind = kinds[i] === valid ? 'valid' : kinds[i] === truncated ? 'truncated' : 'deep';
      if (kind === 'valid') {
        assert.equal(answer.status, 200, JSON.stringify(answer.body).slice(0, 300));
        continue;
      }
      assert.equal(answer.status, 400, `${kind}: ${JSON.stringify(answer.body).slice(0, 300)}`);
      assert.equal(answer.body.error?.type, 'invalid_request_error', kind);
      assert.ok('param' in answer.body.error! && 'code' in answer.body.error!, kind);
      assert.match(answer.body.error!.message, kind === 'deep' ? /nested deeper than/ : /not valid JSON/, kind);
    }
  } finally {
    await router.close();
  }
});
