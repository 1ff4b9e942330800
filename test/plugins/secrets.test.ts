// A hostile plugin that reads the admin token the way a real one can (a
// process's start-up environment in /proc/<pid>/environ, or the file it
// names) and says it everywhere a plugin can: its reason, its pass reason,
// its alternatives' names and notes, errors it throws from pick and from a
// hook, ctx.log and console. The plugin runs in a process of its own whose
// /proc/self/environ is empty; it then reads the router's (its parent's),
// which the same user may read. The real router runs in a child process (the
// token must be in that process's own environment) with full decision
// headers; the token must reach no response header, no log line, neither
// /admin/decisions nor /admin/state.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TINY_MODELS, tinyPool } from '../helpers/router.ts';
import { routingUrls, startChild, SWITCHYARD_BIN, waitUntil } from '../observe/process.ts';
import { pluginPolicyDir } from './plugin-policy.ts';

const SNOOP = `import { readFileSync } from 'node:fs';
function found(pid) {
  const environ = readFileSync('/proc/' + pid + '/environ', 'utf8').split('\\0');
  const direct = environ.find((e) => e.startsWith('SWITCHYARD_ADMIN_TOKEN=') && e.length > 'SWITCHYARD_ADMIN_TOKEN='.length);
  if (direct) return direct.slice('SWITCHYARD_ADMIN_TOKEN='.length);
  const file = environ.find((e) => e.startsWith('SWITCHYARD_ADMIN_TOKEN_FILE=') && e.length > 'SWITCHYARD_ADMIN_TOKEN_FILE='.length);
  return file ? readFileSync(file.slice('SWITCHYARD_ADMIN_TOKEN_FILE='.length), 'utf8').trim() : 'none';
}
// Its own process's start-up environment (empty, as the cage starts it: its size in bytes), then the router's.
const own = () => readFileSync('/proc/self/environ').length;
const stolen = () => found(process.ppid);
let n = 0;
export default {
  name: 'snoop', version: '1.0.0', sdk: '^1',
  create(_config, ctx) {
    return {
      pick(request, candidates) {
        const token = stolen();
        ctx.log.warn('log ' + token, { token });
        console.log('print ' + token);
        switch (n++ % 4) {
          case 1: throw new Error('threw ' + token);
          case 2: return { pass: true, reason: 'pass ' + token };
          default: return { replica: candidates[0].id, reason: 'own ' + own() + ' len ' + token.length + ' ' + token, alternatives: [{ replica: token, score: 1, note: 'note ' + token }] };
        }
      },
      onRouted() { throw new Error('hook ' + stolen()); },
    };
  },
};
`;

for (const via of ['SWITCHYARD_ADMIN_TOKEN', 'SWITCHYARD_ADMIN_TOKEN_FILE'] as const) {
  test(`a plugin that reads the admin token (${via}) never gets it into headers, logs, /admin/decisions or /admin/state`, { timeout: 120_000 }, async () => {
    const token = `adm-${randomBytes(16).toString('hex')}`;
    const dir = pluginPolicyDir('sy-secrets-', { snoop: SNOOP }, { strategies: '[snoop, round-robin]', decisionHeaders: 'full' });
    const tokenFile = join(dir, 'admin-token');
    writeFileSync(tokenFile, `${token}\n`);
    const env = via === 'SWITCHYARD_ADMIN_TOKEN' ? { SWITCHYARD_ADMIN_TOKEN: token } : { SWITCHYARD_ADMIN_TOKEN_FILE: tokenFile };
    const router = startChild(process.execPath, [SWITCHYARD_BIN, 'serve', '--policies', dir, '--port', '0', '--admin-port', '0', '--emulator-speed', '20'], {
      // Each pick reads /proc: a loaded machine may take past the default 20 ms, and a skipped pick says nothing.
      env: { NODE_OPTIONS: '', SWITCHYARD_ADMIN_TOKEN: '', SWITCHYARD_ADMIN_TOKEN_FILE: '', SWITCHYARD_PLUGIN_PICK_TIMEOUT_MS: '500', ...env },
    });
    try {
      const { url, adminUrl } = await routingUrls(router);
      const admin = (path: string) => fetch(`${adminUrl}${path}`, { headers: { authorization: `Bearer ${token}` } });
      await waitUntil('the router to answer', async () => ((await fetch(`${url}/healthz`)).ok ? true : undefined), 60_000, router);
      const reasons: string[] = [];
      for (let i = 0; i < 12; i++) {
        const response = await fetch(`${url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'tiny', prompt: 'hello there', max_tokens: 1 }),
        });
        assert.equal(response.status, 200);
        await response.arrayBuffer();
        const headers = [...response.headers].map(([name, value]) => `${name}: ${value}`).join('\n');
        assert.ok(!headers.includes(token), `request ${i}: the token is in a header:\n${headers}`);
        reasons.push(response.headers.get('x-switchyard-reason') ?? '');
      }
      // Its own process had nothing to give; the router's did, and what reached the client is the redacted form.
      assert.ok(
        reasons.some((r) => r === `snoop: own 0 len ${token.length} [redacted]`),
        reasons.join('\n'),
      );

      const decisions = await (await admin('/admin/decisions?limit=100')).text();
      assert.match(decisions, /\[redacted\]/, "the decision log has the plugin's (redacted) words");
      assert.ok(!decisions.includes(token), 'the token is in /admin/decisions');
      const state = await (await admin('/admin/state')).text();
      assert.ok(!state.includes(token), 'the token is in /admin/state');
      await waitUntil(
        "the plugin's log lines",
        async () => (/print \[redacted\]/.test(router.output()) && /hook \[redacted\]/.test(router.output()) ? true : undefined),
        10_000,
        router,
      );
      await router.stop();
      assert.match(router.output(), /log \[redacted\]/);
      assert.ok(!router.output().includes(token), `the token is in the router's output:\n${router.output()}`);
    } finally {
      await router.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('serve refuses an admin token from both the environment and a file, and an empty token file, in one line', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-secrets-'));
  try {
    writeFileSync(join(dir, 'models.yaml'), TINY_MODELS);
    writeFileSync(join(dir, 'pools.yaml'), tinyPool({ replicas: 1 }));
    writeFileSync(join(dir, 'empty'), '\n');
    for (const [env, expected] of [
      [{ SWITCHYARD_ADMIN_TOKEN: 'abcdefgh-1', SWITCHYARD_ADMIN_TOKEN_FILE: join(dir, 'empty') }, /are both set; unset one/],
      [{ SWITCHYARD_ADMIN_TOKEN_FILE: join(dir, 'empty') }, /is empty; write the token into it/],
      [{ SWITCHYARD_ADMIN_TOKEN_FILE: join(dir, 'missing') }, /cannot read SWITCHYARD_ADMIN_TOKEN_FILE .*missing/],
    ] as const) {
      const child = startChild(process.execPath, [SWITCHYARD_BIN, 'serve', '--policies', dir, '--port', '0', '--admin-port', '0'], {
        env: { NODE_OPTIONS: '', SWITCHYARD_ADMIN_TOKEN: '', SWITCHYARD_ADMIN_TOKEN_FILE: '', ...(env as Record<string, string>) },
      });
      const code = await new Promise<number | null>((resolve) => child.process.once('exit', (c) => resolve(c)));
      assert.equal(code, 1, child.output());
      assert.match(child.output(), expected);
      assert.equal(child.output().trim().split('\n').length, 1, child.output());
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
