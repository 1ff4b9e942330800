// `switchyard validate` refuses what would break at run time, each problem
// at FILE:LINE:COL, and a running router refuses the same change on reload
// instead of applying part of it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OPEN_TENANTS, TINY_MODELS, tinyPool, until } from '../helpers/router.ts';
import { routingUrls, startChild, SWITCHYARD_BIN } from '../observe/process.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const STACK = /^\s+at .+:\d+:\d+\)?$/m;

function run(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, ['bin/switchyard.mjs', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d));
  child.stderr!.on('data', (d: Buffer) => (err += d));
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) => child.once('close', (code) => (clearTimeout(killer), resolve({ code, out, err }))));
}

function policyDir(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'sy-validate-'));
  for (const [name, text] of Object.entries({ 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': tinyPool({ replicas: 1 }), ...files }))
    writeFileSync(join(dir, name), text);
  return dir;
}

const pool = (replicas: string, extra = '') => `kind: pools\n${extra}pools:\n  - name: general\n    model: tiny\n    version: v1\n    replicas:\n${replicas}`;

const CASES: { what: string; files: Record<string, string>; problem: RegExp }[] = [
  {
    what: 'an emulate:// profile the emulator does not have',
    files: { 'pools.yaml': pool('      - { id: r0, url: "emulate://tiny" }\n      - { id: r1, url: "emulate://tinyy" }\n') },
    problem: /pools\.yaml:8:\d+: replica "r1": "emulate:\/\/tinyy" names no engine profile: emulate:\/\/ takes one of .*\btiny\b/,
  },
  {
    what: 'a pool without replicas',
    files: { 'pools.yaml': pool('      []\n').replace('replicas:\n      []', 'replicas: []') },
    problem: /pools\.yaml:6:\d+: pool "general" of tiny@v1 has no replicas: every request routed to it would get a 503; add a replica, or remove the pool/,
  },
  {
    what: 'a replica url with the API path in it',
    files: { 'pools.yaml': pool('      - { id: r0, url: "http://10.0.0.5:8000/v1" }\n') },
    problem: /pools\.yaml:7:\d+: replica "r0": "http:\/\/10\.0\.0\.5:8000\/v1" includes the API path: give the engine's base URL \(http:\/\/10\.0\.0\.5:8000\)/,
  },
  {
    what: 'an alias that points at an alias',
    files: { 'models.yaml': `${TINY_MODELS}aliases:\n  - { name: chat, model: tiny }\n  - { name: chat-large, model: chat }\n` },
    problem: /models\.yaml:7:\d+: alias "chat-large" points at alias "chat": an alias names a model, not another alias \(write model: tiny\)/,
  },
];

for (const { what, files, problem } of CASES) {
  test(`validate refuses ${what}, at FILE:LINE:COL`, async () => {
    const dir = policyDir(files);
    try {
      const r = await run(['validate', dir]);
      assert.equal(r.code, 1, r.out + r.err);
      assert.match(r.err, problem);
      assert.doesNotMatch(r.err + r.out, STACK);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test("a problem in a pools file's defaults is reported once, not once per pool", async () => {
  const two =
    'kind: pools\ndefaults:\n  strategies: [round-robbin]\npools:\n' +
    ['a', 'b', 'c'].map((n, i) => `  - name: ${n}\n    model: tiny\n    version: v1\n    replicas: [{ id: r${i}, url: "emulate://tiny" }]\n`).join('');
  const dir = policyDir({ 'pools.yaml': two });
  try {
    const r = await run(['validate', dir]);
    assert.equal(r.code, 1);
    assert.equal(r.err.match(/round-robbin/g)?.length, 1, r.err);
    assert.match(r.err, /pools\.yaml:3:\d+: strategy "round-robbin" is not registered \(did you mean "round-robin"\?\)/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a running router refuses a reload naming an unknown emulate:// profile, and keeps every replica serving', { timeout: 90_000 }, async () => {
  const dir = policyDir({ 'pools.yaml': pool('      - { id: r0, url: "emulate://tiny" }\n'), 'settings.yaml': 'kind: settings\ndecision_headers: full\n' });
  // The router picks its own ports; a port found free and handed over can be taken meanwhile.
  const router = startChild(process.execPath, [SWITCHYARD_BIN, 'serve', '--policies', dir, '--port', '0', '--admin-port', '0'], { cwd: ROOT });
  try {
    const { url, adminUrl } = await routingUrls(router, 45_000);
    await until(
      () =>
        fetch(`${url}/readyz`).then(
          (r) => r.ok,
          () => false,
        ),
      45_000,
      'serve to answer',
    );
    writeFileSync(join(dir, 'pools.yaml'), pool('      - { id: r0, url: "emulate://tiny" }\n      - { id: r1, url: "emulate://nope" }\n'));
    const reload = (await (await fetch(`${adminUrl}/admin/reload`, { method: 'POST', headers: { 'x-switchyard-admin': '1' } })).json()) as {
      result: string;
      errors: string[];
    };
    assert.equal(reload.result, 'refused');
    assert.match(reload.errors.join('\n'), /pools\.yaml:8:\d+: replica "r1": "emulate:\/\/nope" names no engine profile/);
    const state = (await (await fetch(`${adminUrl}/admin/state`)).json()) as {
      policy: { generation: number; disk: { matchesLive: boolean } };
      replicas: { id: string }[];
    };
    assert.equal(state.policy.generation, 1);
    assert.equal(state.policy.disk.matchesLive, false);
    assert.deepEqual(
      state.replicas.map((r) => r.id),
      ['r0'],
    );
    const answer = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny', prompt: 'hi', max_tokens: 1 }),
    });
    assert.equal(answer.status, 200);
    assert.doesNotMatch(router.output(), STACK);
  } finally {
    await router.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
