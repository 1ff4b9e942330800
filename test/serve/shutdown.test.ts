// SIGTERM: stop accepting, let in-flight requests finish, exit 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { OPEN_TENANTS, TEST_KEY, TINY_MODELS, tinyPool } from '../helpers/router.ts';

const ROOT = new URL('../../', import.meta.url).pathname;

test('SIGTERM lets an in-flight stream finish, then the router exits 0', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-shutdown-'));
  writeFileSync(join(dir, 'models.yaml'), TINY_MODELS);
  writeFileSync(join(dir, 'tenants.yaml'), OPEN_TENANTS);
  writeFileSync(join(dir, 'pools.yaml'), tinyPool({ replicas: 1 }));
  const router = spawn(process.execPath, ['bin/switchyard.mjs', 'serve', '--policies', dir, '--port', '0', '--admin-port', '0', '--emulator-speed', '2'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => router.once('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    router.stdout!.on('data', (data: Buffer) => {
      out += data;
      const match = /"url":"(http:\/\/[^"]+)"/.exec(out);
      if (match) resolve(match[1]);
    });
    void exited.then(() => reject(new Error(`the router exited: ${out}`)));
  });
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: TEST_KEY, maxRetries: 0 });
  const stream = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'go on' }], max_tokens: 200, stream: true });
  let chunks = 0;
  for await (const _chunk of stream) {
    if (++chunks === 3) router.kill('SIGTERM');
  }
  assert.ok(chunks >= 200, `the stream finished: ${chunks} chunks`);
  assert.equal(await exited, 0);
  await assert.rejects(fetch(`${url}/healthz`), 'no longer accepting');
});
