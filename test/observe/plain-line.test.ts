// The routed line built field by field (core/observe/logger.ts, PlainLine)
// must be the very bytes pino writes for the same fields: compared line for
// line with pino's own, through a routerLogger writing to a file, and
// through the real router on loopback with the official client.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { PlainLine, routerLogger, writesPlainLines } from '../../core/observe/logger.ts';
import { OPEN_TENANTS, TINY_MODELS, startTestRouter, tinyPool, until } from '../helpers/router.ts';

interface Fields {
  reqId?: string;
  model?: string;
  adapter?: string;
  status?: number;
  retried?: boolean;
  attempts?: number;
  failure?: string;
}

function plainLine(f: Fields): PlainLine {
  return new PlainLine()
    .str('reqId', f.reqId)
    .str('model', f.model)
    .str('adapter', f.adapter)
    .num('status', f.status)
    .bool('retried', f.retried)
    .num('attempts', f.attempts)
    .str('failure', f.failure);
}

/** The lines in `file` once `logger` has flushed at least `n` of them there (sonic-boom opens the file asynchronously). */
async function linesOf(logger: { flush(): void }, file: string, n: number): Promise<string[]> {
  const read = () => (existsSync(file) ? readFileSync(file, 'utf8').trimEnd().split('\n').filter(Boolean) : []);
  await until(() => (logger.flush(), read().length >= n), 5000, `${n} lines on disk`);
  return read();
}

/** A line with its time (the one thing two writes of the same fields differ in) blanked. */
const untimed = (line: string) => line.replace(/^\{"level":30,"time":\d+,/, '{"level":30,"time":T,');

const CASES: Fields[] = [
  { reqId: 'req-abc-1', model: 'tiny@v1', status: 200, retried: false, attempts: 1 },
  { reqId: 'r', model: 'm@v', adapter: 'sql-lora', status: 502, retried: true, attempts: 3, failure: 'timeout' },
  { reqId: 'x'.repeat(128), model: `${'long-model-name-'.repeat(10)}@v1`, status: 200 },
  { reqId: 'id', status: Number.NaN, attempts: Number.POSITIVE_INFINITY },
  { model: 'ünïcödé-模型@v1', status: 200 },
  { reqId: 'odd!#$%&()*+,-./:;<=>?@[]^_`{|}~', status: 200 },
  {},
];
// Values pino escapes (or, a lone surrogate, writes differently from JSON.stringify): PlainLine gives them to pino.
const ESCAPED: Fields[] = [
  { reqId: 'a"quote', status: 200 },
  { reqId: 'back\\slash', status: 200 },
  { model: 'new\nline', status: 200 },
  { model: 'tab\there' },
  { failure: 'lone \ud800 surrogate' },
  { model: 'emoji 😀@v1' },
];

test('a routerLogger line built by PlainLine is the line pino writes for the same fields; values pino escapes go through pino', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'plain-line-'));
  try {
    const file = join(dir, 'log');
    const logger = routerLogger({ destination: file });
    for (const fields of [...CASES, ...ESCAPED]) {
      logger.info(fields, 'routed');
      const line = plainLine(fields);
      if (!line.writeInfo(logger, 'routed')) {
        assert.ok(ESCAPED.includes(fields), `a plain line was refused: ${JSON.stringify(fields)}`);
        logger.info(fields, 'routed'); // what the log line subscriber does then
      } else assert.ok(CASES.includes(fields), `a value pino escapes was written plain: ${JSON.stringify(fields)}`);
    }
    // Info off: nothing written, and nothing for the caller to write.
    logger.level = 'warn';
    assert.equal(plainLine(CASES[0]).writeInfo(logger, 'routed'), true);
    logger.level = 'info';
    const lines = await linesOf(logger, file, 2 * (CASES.length + ESCAPED.length));
    assert.equal(lines.length, 2 * (CASES.length + ESCAPED.length));
    for (let i = 0; i < lines.length; i += 2) assert.equal(untimed(lines[i + 1]), untimed(lines[i]), `line ${i / 2}`);
    assert.match(
      lines[0],
      /^\{"level":30,"time":\d+,"pid":\d+,"hostname":"[^"]*","reqId":"req-abc-1","model":"tiny@v1","status":200,"retried":false,"attempts":1,"msg":"routed"\}$/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('PlainLine writes only through a routerLogger or a child adding bindings: any other logger, or a child with its own serializers, mixin or prefix, logs through pino', () => {
  let written = '';
  const other = pino({ level: 'info' }, { write: (s: string) => void (written += s) });
  assert.equal(plainLine(CASES[0]).writeInfo(other, 'routed'), false);
  assert.equal(written, '');
  const root = routerLogger({ destination: '/dev/null' });
  assert.ok(writesPlainLines(root));
  assert.ok(writesPlainLines(root.child({ component: 'x' })));
  assert.ok(writesPlainLines(root.child({}, { serializers: { req: (r: unknown) => r } })));
  assert.equal(writesPlainLines(root.child({}, { serializers: { model: (m: unknown) => m } })), false);
  assert.equal(writesPlainLines(root.child({}, { msgPrefix: '[x] ' })), false);
  assert.equal(writesPlainLines(root.child({}, { redact: ['model'] })), false);
  assert.equal(writesPlainLines(other.child({})), false);
});

test('a child of a routerLogger writes its bindings in a PlainLine as pino does', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'plain-line-child-'));
  try {
    const file = join(dir, 'log');
    const child = routerLogger({ destination: file }).child({ component: 'proxy' });
    child.info(CASES[1], 'routed');
    assert.ok(plainLine(CASES[1]).writeInfo(child, 'routed'));
    const [pinos, plain] = await linesOf(child, file, 2);
    assert.match(pinos, /"component":"proxy","reqId":"r"/);
    assert.equal(untimed(plain), untimed(pinos));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the real router's routed line, built by PlainLine, is what pino writes for its fields", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'plain-line-router-'));
  const file = join(dir, 'log');
  const logger = routerLogger({ destination: file });
  const t = await startTestRouter({ 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': tinyPool({ replicas: 2 }) }, { logger });
  try {
    // The log line subscriber logs through app.log, fastify's child of the routerLogger: PlainLine writes through it.
    assert.notEqual(t.router.app.log, logger);
    assert.ok(writesPlainLines(t.router.app.log));
    for (const stream of [false, true]) {
      if (stream) {
        const chunks = await t.client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, stream: true });
        for await (const _ of chunks);
      } else await t.client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
    }
    await until(() => (logger.flush(), existsSync(file) && readFileSync(file, 'utf8').split('"msg":"routed"').length === 3), 5000, 'two routed lines');
    let expected = '';
    const reference = pino({ level: 'info' }, { write: (s: string) => void (expected = s) });
    for (const line of readFileSync(file, 'utf8')
      .trimEnd()
      .split('\n')
      .filter((l) => l.includes('"msg":"routed"'))) {
      const { level: _level, time: _time, pid: _pid, hostname: _hostname, msg, ...fields } = JSON.parse(line) as Record<string, unknown>;
      assert.deepEqual(Object.keys(fields), [
        'reqId',
        'model',
        'pool',
        'replica',
        'strategy',
        'status',
        'outcome',
        'retried',
        'attempts',
        'ttfbMs',
        'durationMs',
      ]);
      reference.info(fields, msg as string);
      assert.equal(untimed(`${line}\n`), untimed(expected));
    }
  } finally {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
