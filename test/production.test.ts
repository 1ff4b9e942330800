// Production runs the compiled JavaScript in dist/ (bin/switchyard.mjs), not
// the TypeScript sources: this starts that router on loopback, with a
// TypeScript and a JavaScript third-party plugin that import the SDK at run
// time, and checks that it serves a request through them and the page it
// reads from disk. The child runs without tsx: a .ts file reached from dist/
// would fail to load.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, test } from 'node:test';
import OpenAI from 'openai';
import { OPEN_TENANTS, TEST_KEY, TINY_MODELS, tinyPool } from './helpers/router.ts';

const ROOT = resolve(import.meta.dirname, '..');
const dir = mkdtempSync(join(tmpdir(), 'sy-production-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const TS_PLUGIN = `import { leastLoaded, type Candidate, type StrategyDefinition } from '@switchyard/sdk';
export default {
  name: 'typed-least',
  version: '1.0.0',
  sdk: '^1',
  create: (_config, ctx) => ({
    pick(_request, candidates: readonly Candidate[]) {
      const { best } = leastLoaded(candidates, ctx.loadScoreWeights);
      return best ? { replica: best.id, reason: 'typed-least from dist' } : null;
    },
  }),
} satisfies StrategyDefinition;
`;
const JS_PLUGIN = `import { isPass } from '@switchyard/sdk';
export default { name: 'passer', version: '1.0.0', sdk: '^1', create: () => ({ pick: () => (isPass({ pass: true, reason: 'x' }) ? { pass: true, reason: 'always passes' } : null) }) };
`;

test('the compiled router serves from dist/, with TypeScript and JavaScript plugins that import the SDK', async () => {
  writeFileSync(join(dir, 'models.yaml'), TINY_MODELS);
  writeFileSync(join(dir, 'tenants.yaml'), OPEN_TENANTS);
  writeFileSync(join(dir, 'pools.yaml'), tinyPool({ replicas: 2, strategies: '[passer, typed-least]' }));
  writeFileSync(join(dir, 'settings.yaml'), 'kind: settings\nplugin_dirs: [plugins]\ndecision_headers: full\n');
  mkdirSync(join(dir, 'plugins'));
  writeFileSync(join(dir, 'plugins', 'typed-least.ts'), TS_PLUGIN);
  writeFileSync(join(dir, 'plugins', 'passer.mjs'), JS_PLUGIN);

  const router = spawn(process.execPath, ['bin/switchyard.mjs', 'serve', '--policies', dir, '--port', '0', '--admin-port', '0', '--emulator-speed', '4'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NODE_OPTIONS: '' },
  });
  const exited = new Promise<number | null>((done) => router.once('exit', (code) => done(code)));
  let err = '';
  router.stderr!.on('data', (data: Buffer) => (err += data));
  try {
    const [url, adminUrl] = await new Promise<[string, string]>((done, fail) => {
      let out = '';
      router.stdout!.on('data', (data: Buffer) => {
        out += data;
        const match = /"url":"(http:\/\/[^"]+)","admin":"(http:\/\/[^"]+)"/.exec(out);
        if (match) done([match[1], match[2]]);
      });
      void exited.then(() => fail(new Error(`the router exited: ${out}\n${err}`)));
    });

    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: TEST_KEY, maxRetries: 0 });
    const { data, response } = await client.chat.completions
      .create({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: 8 })
      .withResponse();
    assert.ok(data.choices[0].message.content);
    assert.equal(response.headers.get('x-switchyard-reason'), 'typed-least: typed-least from dist');

    const page = await fetch(`${adminUrl}/admin/explorer`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<html/i);
  } finally {
    router.kill('SIGTERM');
    await exited;
  }
  assert.doesNotMatch(err, /tsx|ERR_UNKNOWN_FILE_EXTENSION|ERR_MODULE_NOT_FOUND/);
});
