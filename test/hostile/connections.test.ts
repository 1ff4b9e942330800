// Connection hygiene over raw sockets: silent, slow, trickling and lying
// clients are closed by the server's own timeouts (set short here), idle
// keep-alive connections go, and the connection cap holds.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { OPEN_TENANTS, startTestRouter, TINY_MODELS, tinyPool, type TestRouter } from '../helpers/router.ts';
import { closedWithin, openAiError, openSocket, rawExchange } from './raw-http.ts';

const files = { 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': tinyPool({ replicas: 1 }) };
const HEADERS_MS = 300;
const REQUEST_MS = 700;
const KEEP_ALIVE_MS = 400;
// Timeouts fire on a periodic check: allow for it and for a loaded machine.
const SLACK_MS = 4000;

let t: TestRouter;
before(async () => {
  t = await startTestRouter(files, {
    limits: { headersTimeoutMs: HEADERS_MS, requestTimeoutMs: REQUEST_MS, keepAliveTimeoutMs: KEEP_ALIVE_MS, maxConnections: 1000 },
  });
});
after(() => t.close());

/** Collects what the server writes, so its 408 can be checked after the close. */
function collect(socket: import('node:net').Socket): () => string {
  let data = '';
  socket.on('data', (chunk) => (data += chunk.toString('latin1')));
  return () => data;
}

function assert408(written: string): void {
  assert.match(written, /^HTTP\/1\.1 408 /);
  assert.equal(openAiError(written.slice(written.indexOf('\r\n\r\n') + 4)).code, 'request_timeout');
}

test('connections that never send a byte are closed after the head timeout', async () => {
  const sockets = await Promise.all(Array.from({ length: 20 }, () => openSocket(t.url)));
  const outputs = sockets.map(collect);
  const closed = await Promise.all(sockets.map((s) => closedWithin(s, HEADERS_MS + SLACK_MS)));
  for (const ms of closed) assert.ok(ms >= HEADERS_MS / 2, `closed after ${ms} ms: too early`);
  for (const out of outputs) assert408(out());
});

test('slowloris: a head sent one header a time, forever, is cut off', async () => {
  const socket = await openSocket(t.url);
  const out = collect(socket);
  socket.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n');
  let n = 0;
  const drip = setInterval(() => socket.writable && socket.write(`X-Drip-${n++}: a\r\n`), 40);
  try {
    await closedWithin(socket, HEADERS_MS + SLACK_MS);
  } finally {
    clearInterval(drip);
  }
  assert408(out());
});

test('a body trickled a byte at a time is cut off at the request timeout', async () => {
  const socket = await openSocket(t.url);
  const out = collect(socket);
  socket.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{');
  const drip = setInterval(() => socket.writable && socket.write(' '), 40);
  try {
    const ms = await closedWithin(socket, REQUEST_MS + SLACK_MS);
    assert.ok(ms >= REQUEST_MS / 2, `closed after ${ms} ms`);
  } finally {
    clearInterval(drip);
  }
  assert408(out());
});

test('a Content-Length lie does not hold the connection', async () => {
  const socket = await openSocket(t.url);
  const out = collect(socket);
  socket.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"model":"tiny","messages":[]}');
  await closedWithin(socket, REQUEST_MS + SLACK_MS);
  assert408(out());
});

test('an idle keep-alive connection is closed after the keep-alive timeout, and served until then', async () => {
  const socket = await openSocket(t.url);
  const out = collect(socket);
  const request = 'GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n';
  socket.write(request);
  await new Promise((resolve) => setTimeout(resolve, KEEP_ALIVE_MS / 4));
  socket.write(request); // a second request on the same connection is served
  const ms = await closedWithin(socket, KEEP_ALIVE_MS + SLACK_MS);
  assert.equal(out().match(/HTTP\/1\.1 200 /g)?.length, 2, out().slice(0, 200));
  assert.ok(ms >= KEEP_ALIVE_MS / 2, `closed after ${ms} ms`);
});

test('the connection cap: connections past it are closed at once, the rest are served, and the server recovers', async () => {
  const capped = await startTestRouter(files, { limits: { maxConnections: 10, headersTimeoutMs: 20_000, requestTimeoutMs: 20_000 } });
  const sockets: import('node:net').Socket[] = [];
  try {
    for (let i = 0; i < 15; i++) sockets.push(await openSocket(capped.url));
    // The server drops the ones past the cap as it accepts them.
    const closed = await Promise.all(
      sockets.map((s) =>
        closedWithin(s, 1500).then(
          () => true,
          () => false,
        ),
      ),
    );
    assert.equal(closed.filter(Boolean).length, 5, `${closed.filter(Boolean).length} of 15 closed`);
    // The ten held ones still get answers.
    const held = sockets.filter((s) => !s.destroyed);
    const outs = held.map(collect);
    for (const s of held) s.write('GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    await Promise.all(held.map((s) => closedWithin(s, SLACK_MS)));
    for (const out of outs) assert.match(out(), /^HTTP\/1\.1 200 /);
    const answer = await rawExchange(capped.url, 'GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    assert.equal(answer.status, 200);
  } finally {
    for (const s of sockets) s.destroy();
    await capped.close();
  }
});

test('the bounds come from settings.yaml', async () => {
  const settings = 'kind: settings\nmax_header_bytes: 2048\nmax_json_depth: 8\nmax_json_values: 1000\nbody_limit_bytes: 4096\n';
  const configured = await startTestRouter({ ...files, 'settings.yaml': settings });
  try {
    const post = (body: string, headers: Record<string, string> = {}) =>
      fetch(`${configured.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
    const ok = '{"model":"tiny","max_tokens":1,"messages":[{"role":"user","content":"hi"}]';
    assert.equal((await post(`${ok}}`)).status, 200);
    assert.equal((await post(`${ok}}`, { 'x-big': 'b'.repeat(3000) })).status, 431);
    assert.equal((await post(`${ok},"x":${'['.repeat(7)}${']'.repeat(7)}}`)).status, 200, '8 levels in all');
    const deep = await post(`${ok},"x":${'['.repeat(8)}${']'.repeat(8)}}`);
    assert.equal(deep.status, 400);
    assert.match(openAiError(await deep.text()).message, /deeper than 8/);
    assert.equal((await post(`${ok},"x":[${'1,'.repeat(1000)}1]}`)).status, 400);
    assert.equal((await post(`${ok},"x":"${'x'.repeat(5000)}"}`)).status, 413);
  } finally {
    await configured.close();
  }
});
