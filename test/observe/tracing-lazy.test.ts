// OpenTelemetry is loaded only with tracing on: `serve` without --tracing
// never resolves an @opentelemetry module (a module hook records every one
// the real CLI loads), and with --tracing it does.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OPEN_TENANTS, TINY_MODELS, tinyPool } from '../helpers/router.ts';
import { routingUrls, startChild, SWITCHYARD_BIN, waitUntil } from './process.ts';

/** Runs `serve` with `args` until it answers, and lists the modules it loaded. */
async function modulesLoaded(dir: string, args: string[]): Promise<string[]> {
  const log = join(dir, `modules-${args.length}.txt`);
  const hooks = join(dir, 'hooks.mjs');
  writeFileSync(
    hooks,
    `import { appendFileSync } from 'node:fs';\nexport async function resolve(specifier, context, next) {\n  const resolved = await next(specifier, context);\n  appendFileSync(${JSON.stringify(log)}, resolved.url + '\\n');\n  return resolved;\n}\n`,
  );
  writeFileSync(join(dir, 'register.mjs'), `import { register } from 'node:module';\nregister(${JSON.stringify(`file://${hooks}`)});\n`);
  const child = startChild(process.execPath, [
    '--import',
    join(dir, 'register.mjs'),
    SWITCHYARD_BIN,
    'serve',
    '--policies',
    join(dir, 'policies'),
    '--port',
    '0',
    '--admin-port',
    '0',
    ...args,
  ]);
  try {
    const { url } = await routingUrls(child, 45_000);
    await waitUntil('serve to answer', async () => ((await fetch(`${url}/readyz`)).ok ? true : undefined), 45_000, child);
    // A request too: the request path must not load it either.
    await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny', prompt: 'hi', max_tokens: 1 }),
    });
  } finally {
    await child.stop();
  }
  assert.ok(existsSync(log), 'the module hook ran');
  return readFileSync(log, 'utf8').split('\n').filter(Boolean);
}

test('serve loads OpenTelemetry only with --tracing', { timeout: 120_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-lazy-otel-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const policies = join(dir, 'policies');
  (await import('node:fs')).mkdirSync(policies);
  for (const [name, text] of Object.entries({ 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': tinyPool({ replicas: 1 }) }))
    writeFileSync(join(policies, name), text);

  const off = await modulesLoaded(dir, []);
  assert.ok(
    off.some((url) => url.includes('/dist/core/serve/server.js')),
    'the hook saw the router load',
  );
  assert.deepEqual(
    off.filter((url) => url.includes('@opentelemetry')),
    [],
    'no OpenTelemetry module without --tracing',
  );

  const on = await modulesLoaded(dir, ['--tracing', 'console', '--tracing-sample-ratio', '0']);
  assert.ok(
    on.some((url) => url.includes('@opentelemetry/sdk-trace-base')),
    'with --tracing, the SDK is loaded',
  );
});
