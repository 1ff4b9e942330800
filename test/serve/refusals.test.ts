// Every refused API request can be traced by the request id the client got
// back: a bad header, malformed JSON, a wrong content type and a body of the
// wrong shape each leave a log line, a rejection metric and a decision
// record under that id (the real CLI, its JSON log on stdout).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OPEN_TENANTS, TINY_MODELS, tinyPool, until } from '../helpers/router.ts';
import { routingUrlsIn } from '../observe/process.ts';

const ROOT = new URL('../../', import.meta.url).pathname;

const REFUSED: { id: string; what: string; headers: Record<string, string>; body: string }[] = [
  {
    id: 'trace-bad-priority',
    what: 'a bad x-priority header',
    headers: { 'content-type': 'application/json', 'x-priority': '!!nope!!' },
    body: JSON.stringify({ model: 'tiny', prompt: 'hi', max_tokens: 1 }),
  },
  { id: 'trace-bad-json', what: 'malformed JSON', headers: { 'content-type': 'application/json' }, body: '{"model": "tiny", "prompt": ' },
  { id: 'trace-bad-type', what: 'a wrong content type', headers: { 'content-type': 'text/plain' }, body: 'model=tiny' },
  {
    id: 'trace-bad-shape',
    what: 'a wrong-typed body',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', prompt: 'hi', max_tokens: 'lots' }),
  },
];

test('refused requests leave a log line, a metric and a decision record under the request id the client got', { timeout: 90_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-refusals-'));
  for (const [name, text] of Object.entries({ 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': tinyPool({ replicas: 1 }) }))
    writeFileSync(join(dir, name), text);
  const child = spawn(process.execPath, ['bin/switchyard.mjs', 'serve', '--policies', dir, '--port', '0', '--admin-port', '0', '--log-level', 'info'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stdout!.on('data', (d: Buffer) => (log += d));
  child.stderr!.on('data', (d: Buffer) => (log += d));
  t.after(async () => {
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('close', resolve));
    rmSync(dir, { recursive: true, force: true });
  });
  // The router picks its own ports (a port found free and handed over can be taken meanwhile).
  await until(() => routingUrlsIn(log) !== undefined, 45_000, 'serve to say where it listens');
  const { url, adminUrl } = routingUrlsIn(log)!;
  await until(
    () =>
      fetch(`${url}/readyz`).then(
        (r) => r.ok,
        () => false,
      ),
    45_000,
    'serve to answer',
  );
  const rejectionsOf = async () => {
    const text = await (await fetch(`${adminUrl}/metrics`)).text();
    return Number(/^switchyard_rejections_total\{reason="invalid_request"\} (\d+)$/m.exec(text)?.[1] ?? 0);
  };
  const before = await rejectionsOf();

  for (const { id, what, headers, body } of REFUSED) {
    const response = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { ...headers, 'x-request-id': id }, body });
    assert.equal(response.status, 400, what);
    assert.equal(response.headers.get('x-request-id'), id, what);
    const error = ((await response.json()) as { error: { message: string; type: string } }).error;
    assert.equal(error.type, 'invalid_request_error', what);

    const record = await fetch(`${adminUrl}/admin/decisions/${id}`);
    assert.equal(record.status, 200, `${what}: a decision record under ${id}`);
    const decision = (await record.json()) as { requestId: string; status: number; reason: string };
    assert.equal(decision.requestId, id);
    assert.equal(decision.status, 400);
    assert.ok(decision.reason.includes(error.message.slice(0, 40)), `${what}: ${decision.reason}`);
  }
  assert.equal(await rejectionsOf(), before + REFUSED.length, 'each refusal is counted');
  await until(() => REFUSED.every(({ id }) => log.includes(`"reqId":"${id}"`)), 5000, 'a log line for each refusal');
  for (const { id, what } of REFUSED) {
    const line = log.split('\n').find((l) => l.includes(`"reqId":"${id}"`))!;
    assert.match(line, /"msg":"(rejected|refused before routing)"/, what);
    assert.match(line, /"status":400/, what);
  }

  // A routed request's one line carries its id too, first, as every request's logger puts it (core/serve/request-log.ts).
  const routed = await fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': 'trace-routed' },
    body: JSON.stringify({ model: 'tiny', prompt: 'hi', max_tokens: 1 }),
  });
  assert.equal(routed.status, 200);
  await routed.arrayBuffer();
  await until(() => log.includes('"reqId":"trace-routed"'), 5000, 'a log line for the routed request');
  const line = JSON.parse(log.split('\n').find((l) => l.includes('"reqId":"trace-routed"'))!) as Record<string, unknown>;
  assert.equal(line.msg, 'routed');
  assert.equal(line.status, 200);
  assert.ok(Object.keys(line).indexOf('reqId') < Object.keys(line).indexOf('model'), 'the id comes before the decision');
});
