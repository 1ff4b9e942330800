// Floods over raw sockets against the real server: one client holding many
// connections (others still get in), deep pipelining and a request burst on
// one connection (closed), an unknown API key with a large body (refused on
// the head, before any body byte), and large bodies at once from one client
// (bounded; the next is a 429 before its body is read).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { OPEN_TENANTS, startTestRouter, TEST_KEY, TINY_MODELS, tinyPool } from '../helpers/router.ts';
import { closedWithin, hostPort, openSocket, rawExchange } from './raw-http.ts';

const files = { 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': tinyPool({ replicas: 1 }) };
const KEYED_TENANTS =
  'kind: tenants\ntenants:\n  - { id: t1, tier: free, api_key_sha256: [f3abf2a6cc4f00987743db5f544ba345b4899ae31f326d8ee9c4816de153c9e0] }\n';

function socketFrom(url: string, localAddress: string): Promise<Socket> {
  const { host, port } = hostPort(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, localAddress }, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Reads from `socket` until it closes or `ms` pass; the statuses of the responses seen. */
function statusesUntilClose(socket: Socket, ms: number): Promise<{ statuses: number[]; closed: boolean }> {
  return new Promise((resolve) => {
    let text = '';
    const done = (closed: boolean) => resolve({ statuses: [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1])), closed });
    const timer = setTimeout(() => done(false), ms);
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      done(true);
    });
  });
}

test('one client address holding its share of connections: its next ones are closed, another client still gets in', async () => {
  const t = await startTestRouter(files, { limits: { maxConnections: 40, maxConnectionsPerClient: 20 } });
  const held: Socket[] = [];
  try {
    for (let i = 0; i < 30; i++) {
      const socket = await socketFrom(t.url, '127.0.0.1');
      socket.on('error', () => {});
      held.push(socket);
    }
    const closed = await Promise.all(
      held.map((s) =>
        closedWithin(s, 1500).then(
          () => true,
          () => false,
        ),
      ),
    );
    assert.equal(closed.filter(Boolean).length, 10, 'the 10 past the share of 20 are closed');
    // Another address (the loopback /8 is all ours) is served while the first holds 20.
    const other = await socketFrom(t.url, '127.0.0.2');
    const answer = statusesUntilClose(other, 5000);
    other.write(`GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_KEY}\r\nConnection: close\r\n\r\n`);
    assert.deepEqual((await answer).statuses, [200]);
  } finally {
    for (const socket of held) socket.destroy();
    await t.close();
  }
});

test('200 pipelined requests on one connection: it is closed past the depth, having answered at most that many; the router serves on', async () => {
  const t = await startTestRouter(files, { limits: { maxPipelinedRequests: 16 } });
  try {
    const socket = await openSocket(t.url);
    const seen = statusesUntilClose(socket, 10_000);
    socket.write(`GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n`.repeat(200));
    const { statuses, closed } = await seen;
    assert.ok(closed, 'closed');
    assert.ok(statuses.length <= 16 + 1, `${statuses.length} answered`);
    // Another client is served at once; this one's new connections are closed for a moment, then served again.
    const other = await socketFrom(t.url, '127.0.0.2');
    const answer = statusesUntilClose(other, 5000);
    other.write(`GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    assert.deepEqual((await answer).statuses, [200]);
    const penalized = await openSocket(t.url);
    assert.ok((await statusesUntilClose(penalized, 2000)).closed, 'closed at once while penalized');
    await new Promise((resolve) => setTimeout(resolve, 2100));
    const after = await rawExchange(t.url, `GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    assert.equal(after.status, 200);
  } finally {
    await t.close();
  }
});

test('a client in its penalty: its connections opened before it are closed at their next request, unanswered; the others are served', async () => {
  const t = await startTestRouter(files, { limits: { maxPipelinedRequests: 16 } });
  const held: Socket[] = [];
  try {
    for (let i = 0; i < 5; i++) held.push(await socketFrom(t.url, '127.0.0.7'));
    const bystander = await socketFrom(t.url, '127.0.0.8');
    const flooded = statusesUntilClose(held[0]!, 10_000);
    held[0]!.write(`GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n`.repeat(200));
    assert.ok((await flooded).closed, 'the flooding connection is closed');
    for (const socket of held.slice(1)) {
      const seen = statusesUntilClose(socket, 5000);
      socket.write(`GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n`.repeat(3));
      assert.deepEqual(await seen, { statuses: [], closed: true }, 'closed before any answer');
    }
    const answer = statusesUntilClose(bystander, 5000);
    bystander.write(`GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    assert.deepEqual((await answer).statuses, [200]);
  } finally {
    for (const socket of held) socket.destroy();
    await t.close();
  }
});

test('a burst of requests one after another on one connection: closed past the per-connection rate', async () => {
  const t = await startTestRouter(files, { limits: { maxRequestsPerConnectionPerSecond: 50 } });
  try {
    const socket = await openSocket(t.url);
    socket.on('error', () => {});
    let answered = 0;
    let closed = false;
    socket.on('close', () => (closed = true));
    let buffer = '';
    await new Promise<void>((resolve) => {
      const next = () => {
        if (closed || answered >= 500) return resolve();
        socket.write('GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n');
      };
      socket.on('data', (chunk: Buffer) => {
        buffer += chunk.toString('latin1');
        const done = buffer.split('HTTP/1.1 ').length - 1;
        if (done > answered) {
          answered = done;
          next();
        }
      });
      socket.on('close', () => resolve());
      next();
    });
    assert.ok(closed, `closed after ${answered} answers`);
    assert.ok(answered >= 40 && answered < 500, `${answered} answered before the close`);
  } finally {
    await t.close();
  }
});

test('an unknown API key with a 4 MB body is refused on the head, before the body is sent; a known key is unaffected', async () => {
  const t = await startTestRouter({ ...files, 'tenants.yaml': KEYED_TENANTS });
  try {
    for (const authorization of ['Bearer sk-unknown', '']) {
      const socket = await openSocket(t.url);
      const seen = statusesUntilClose(socket, 5000);
      socket.write(
        `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${authorization ? `Authorization: ${authorization}\r\n` : ''}Content-Length: 4000000\r\n\r\n`,
      );
      const { statuses, closed } = await seen; // no body byte sent
      assert.deepEqual(statuses, [401], authorization);
      assert.ok(closed, 'closed rather than read the body it does not want');
    }
    const chat = JSON.stringify({ model: 'tiny', max_tokens: 1, messages: [{ role: 'user', content: 'hi there' }] });
    const ok = await rawExchange(
      t.url,
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer ${TEST_KEY}\r\nConnection: close\r\nContent-Length: ${chat.length}\r\n\r\n${chat}`,
    );
    assert.equal(ok.status, 200, ok.body);
    const metrics = await (await fetch(`${t.adminUrl}/metrics`)).text();
    assert.match(metrics, /switchyard_rejections_total\{reason="invalid_api_key"\} 2/);
  } finally {
    await t.close();
  }
});

test('large bodies at once from one client are bounded: the third waits for none, it is a 429 before its body is read', async () => {
  const t = await startTestRouter(files, { limits: { largeBodyBytes: 2048, maxLargeBodiesPerClient: 2 } });
  const sockets: Socket[] = [];
  try {
    const body = JSON.stringify({ model: 'tiny', max_tokens: 1, messages: [{ role: 'user', content: 'hi' }], padding: 'x'.repeat(10_000) });
    const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
    const pending = [];
    for (let i = 0; i < 2; i++) {
      const socket = await openSocket(t.url);
      sockets.push(socket);
      pending.push(statusesUntilClose(socket, 10_000));
      socket.write(head); // the body comes later
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    const third = await rawExchange(t.url, head + body);
    assert.equal(third.status, 429, third.body);
    assert.match(third.body, /too_many_large_bodies/);
    assert.match(third.head, /retry-after: 1/i);
    // The two in progress finish, and then a large body is welcome again.
    for (const socket of sockets) socket.write(body);
    for (const answer of await Promise.all(pending)) assert.deepEqual(answer.statuses, [200]);
    assert.equal((await rawExchange(t.url, head + body)).status, 200);
  } finally {
    for (const socket of sockets) socket.destroy();
    await t.close();
  }
});
