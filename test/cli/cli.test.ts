// The command line as a person (or a platform) uses it: real processes of
// bin/switchyard.mjs. Every documented flag and environment variable of
// `serve` takes effect; start-up failures are one line and exit code 1;
// no command prints a stack trace.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SERVE_SETTINGS } from '../../cli/serve.ts';
import { json, OPEN_TENANTS, TINY_MODELS, tinyPool, until } from '../helpers/router.ts';
import { freePort } from '../observe/process.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string; license: string };
const STACK = /^\s+at .+:\d+:\d+\)?$/m;

interface Run {
  code: number | null;
  out: string;
  err: string;
}

/** Runs the CLI to completion (bounded). */
function run(args: string[], env: Record<string, string> = {}, timeoutMs = 60_000): Promise<Run> {
  const child = spawn(process.execPath, ['bin/switchyard.mjs', ...args], { cwd: ROOT, env: { ...cleanEnv(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d));
  child.stderr!.on('data', (d: Buffer) => (err += d));
  const killer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve) =>
    child.once('close', (code) => {
      clearTimeout(killer);
      resolve({ code, out, err });
    }),
  );
}

/** The environment without any SWITCHYARD_* or PORT of the machine running the tests. */
function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SWITCHYARD_') && k !== 'PORT'));
}

function policyDir(extra: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'sy-cli-'));
  const files = { 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': tinyPool({ replicas: 1 }), ...extra };
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

/** Starts `serve`, waits until its admin listener answers, and hands back a stopper. */
async function serve(args: string[], env: Record<string, string>, adminPort: number) {
  const child = spawn(process.execPath, ['bin/switchyard.mjs', 'serve', ...args], {
    cwd: ROOT,
    env: { ...cleanEnv(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d));
  child.stderr!.on('data', (d: Buffer) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let dead = false;
  void exited.then(() => (dead = true));
  try {
    await until(
      async () => {
        if (dead) throw new Error(`serve exited: ${out}${err}`);
        return fetch(`http://127.0.0.1:${adminPort}/readyz`).then(
          (r) => r.ok,
          () => false,
        );
      },
      45_000,
      'serve to answer',
    );
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  return {
    output: () => out + err,
    hup: () => child.kill('SIGHUP'),
    async stop(): Promise<number | null> {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

test('--version and -v print the version from package.json', async () => {
  for (const flag of ['--version', '-v']) {
    const r = await run([flag]);
    assert.equal(r.code, 0);
    assert.equal(r.out.trim(), `switchyard ${PKG.version}`);
  }
});

test('a LICENSE file carries the license package.json names', () => {
  assert.equal(PKG.license, 'Apache-2.0');
  const text = readFileSync(join(ROOT, 'LICENSE'), 'utf8');
  assert.match(text, /Apache License\s+Version 2\.0, January 2004/);
  assert.match(text, /END OF TERMS AND CONDITIONS/);
});

test('serve --help documents every flag with its environment variable and default; sim --help mentions --json', async () => {
  const r = await run(['serve', '--help']);
  assert.equal(r.code, 0);
  for (const s of SERVE_SETTINGS) {
    assert.match(r.out, new RegExp(`--${s.flag}\\b`), s.flag);
    for (const name of s.env) assert.ok(r.out.includes(name), `${s.flag}: ${name}`);
    if (s.default !== undefined) assert.ok(r.out.includes(`(default ${s.default})`), `${s.flag} default`);
  }
  assert.match(r.out, /SWITCHYARD_ADMIN_TOKEN/);
  assert.match(r.out, /--policies DIR\s+policy directory \(default policies\)/);
  const sim = await run(['sim', '--help']);
  assert.match(sim.out, /--json/);
  const usage = await run(['--help']);
  assert.match(usage.out, /--version/);
});

test('every serve setting from the environment: the router listens where the env says, a flag wins over env, SWITCHYARD_PORT over PORT', async () => {
  const [port, adminPort, otherPort] = [await freePort(), await freePort(), await freePort()];
  const dir = policyDir();
  const stateDir = mkdtempSync(join(tmpdir(), 'sy-cli-state-'));
  // A control plane serving a routing table: SWITCHYARD_CONTROL_PLANE, _TTL_MS and SWITCHYARD_STATE_DIR.
  const table =
    'kind: routing-table\nversion: "t1"\nmodels:\n  - id: tiny\n    versions: [{ version: v1 }]\npools:\n  - name: general\n    model: tiny\n    version: v1\n    replicas:\n      - { id: cp0, url: "emulate://tiny" }\n';
  const cp = createHttpServer((_req, res) => res.writeHead(200, { 'content-type': 'application/yaml' }).end(table));
  await new Promise<void>((resolve) => cp.listen(0, '127.0.0.1', resolve));
  const cpUrl = `http://127.0.0.1:${(cp.address() as AddressInfo).port}/routing-table`;
  const localOnly = mkdtempSync(join(tmpdir(), 'sy-cli-local-'));
  writeFileSync(join(localOnly, 'tenants.yaml'), OPEN_TENANTS);
  const env = {
    SWITCHYARD_POLICIES: localOnly,
    PORT: String(otherPort),
    SWITCHYARD_PORT: String(port),
    SWITCHYARD_HOST: '127.0.0.1',
    SWITCHYARD_ADMIN_PORT: String(adminPort),
    SWITCHYARD_ADMIN_HOST: '127.0.0.1',
    SWITCHYARD_ADMIN_TOKEN: 'tok-123',
    SWITCHYARD_LOG_LEVEL: 'warn',
    SWITCHYARD_EMULATOR_SPEED: '20',
    SWITCHYARD_CONTROL_PLANE: cpUrl,
    SWITCHYARD_CONTROL_PLANE_TTL_MS: '60000',
    SWITCHYARD_STATE_DIR: stateDir,
    SWITCHYARD_WATCHDOG_MS: '30000',
  };
  try {
    const router = await serve([], env, adminPort);
    try {
      const completion = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', prompt: 'hi', max_tokens: 2 }),
      });
      assert.equal(completion.status, 200, 'SWITCHYARD_PORT, not PORT');
      assert.equal(completion.headers.get('x-switchyard-replica') ?? 'cp0', 'cp0', 'the replica came from the control plane');
      await assert.rejects(fetch(`http://127.0.0.1:${otherPort}/healthz`), 'nothing on PORT');
      assert.equal((await fetch(`http://127.0.0.1:${adminPort}/admin/state`)).status, 403, 'SWITCHYARD_ADMIN_TOKEN is required');
      const state = await json(await fetch(`http://127.0.0.1:${adminPort}/admin/state`, { headers: { authorization: 'Bearer tok-123' } }));
      assert.equal(state.policy.controlPlane.url, cpUrl);
      assert.equal(state.policy.controlPlane.ttlMs ?? 60000, 60000);
      assert.deepEqual(
        state.replicas.map((r: { id: string }) => r.id),
        ['cp0'],
      );
      assert.ok(existsSync(join(stateDir, 'routing-table.json')), 'the table was kept in SWITCHYARD_STATE_DIR');
    } finally {
      assert.equal(await router.stop(), 0);
      assert.doesNotMatch(router.output(), /"msg":"switchyard is routing"/, 'SWITCHYARD_LOG_LEVEL=warn hides info lines');
    }

    // PORT alone (platforms set it), and flags over env.
    const [flagPort, flagAdmin] = [await freePort(), await freePort()];
    const second = await serve(
      ['--port', String(flagPort), '--admin-port', String(flagAdmin), '--policies', dir, '--emulator-speed', '20'],
      { PORT: String(otherPort), SWITCHYARD_ADMIN_PORT: String(adminPort), SWITCHYARD_POLICIES: '/nonexistent', SWITCHYARD_LOG_LEVEL: 'info' },
      flagAdmin,
    );
    try {
      assert.equal((await fetch(`http://127.0.0.1:${flagPort}/healthz`)).status, 200, '--port over PORT');
      await assert.rejects(fetch(`http://127.0.0.1:${adminPort}/healthz`), '--admin-port over SWITCHYARD_ADMIN_PORT');
    } finally {
      assert.equal(await second.stop(), 0);
      // The log is buffered: read it once the process is gone.
      assert.match(second.output(), /"msg":"switchyard is routing"/);
    }
    const third = await serve(['--policies', dir, '--admin-port', String(flagAdmin)], { PORT: String(otherPort) }, flagAdmin);
    try {
      assert.equal((await fetch(`http://127.0.0.1:${otherPort}/healthz`)).status, 200, 'PORT alone is used');
      // SIGHUP answers (in the log) with what is on disk: here, refused with the problem.
      writeFileSync(join(dir, 'pools.yaml'), tinyPool({ replicas: 1 }).replace('model: tiny', 'model: tinny'));
      third.hup();
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      assert.equal(await third.stop(), 0);
      assert.match(third.output(), /"msg":"SIGHUP: policy refused"/);
      assert.match(third.output(), /pools\.yaml:\d+:\d+: unknown model/);
    }
  } finally {
    cp.closeAllConnections();
    await new Promise((resolve) => cp.close(resolve));
  }
});

test('bad settings from the environment are named like bad flags (exit 2, one line)', async () => {
  const cases: [string, string, RegExp][] = [
    ['SWITCHYARD_PORT', 'eighty', /--port must be a port number/],
    ['SWITCHYARD_ADMIN_PORT', '70000', /--admin-port must be a port number/],
    ['SWITCHYARD_LOG_LEVEL', 'loud', /--log-level must be one of/],
    ['SWITCHYARD_EMULATOR_SPEED', '-1', /--emulator-speed must be a positive number/],
    ['SWITCHYARD_CONTROL_PLANE_TTL_MS', 'soon', /--control-plane-ttl-ms must be a positive number/],
    ['SWITCHYARD_WATCHDOG_MS', 'never', /--watchdog-ms must be a positive number/],
  ];
  for (const [name, value, message] of cases) {
    const r = await run(['serve'], { [name]: value });
    assert.equal(r.code, 2, `${name}=${value}: ${r.err}`);
    assert.match(r.err, message);
    assert.equal(r.err.trim().split('\n').length, 1, r.err);
  }
  const open = await run(['serve', '--admin-host', '0.0.0.0', '--port', '0', '--admin-port', '0']);
  assert.equal(open.code, 1);
  assert.match(open.err, /SWITCHYARD_ADMIN_TOKEN/);
  assert.doesNotMatch(open.err, STACK);
});

test('a busy port is one line and exit 1, found before the policy is read', async () => {
  const busy: Server = createServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  const port = (busy.address() as AddressInfo).port;
  try {
    // The policy directory does not exist: had it been read first, that would be the error.
    const r = await run(['serve', '--port', String(port), '--admin-port', '0', '--policies', '/nonexistent-policies']);
    assert.equal(r.code, 1);
    assert.equal(r.err.trim(), `switchyard serve: cannot listen on 127.0.0.1:${port} (port): the address is already in use`);
    const admin = await run(['serve', '--port', '0', '--admin-port', String(port), '--policies', '/nonexistent-policies']);
    assert.equal(admin.code, 1);
    assert.match(admin.err, /cannot listen on 127\.0\.0\.1:\d+ \(admin port\): the address is already in use/);
  } finally {
    await new Promise((resolve) => busy.close(resolve));
  }
});

const BOMB =
  'kind: models\na: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n';

test('a YAML alias bomb is a located problem on every command, never a stack trace', async () => {
  const dir = policyDir({ 'zz-bomb.yaml': BOMB });
  const request = join(dir, 'request.json');
  writeFileSync(request, JSON.stringify({ model: 'tiny', prompt: 'hi' }));
  const workload = join(ROOT, 'examples/workloads/chat.yaml');
  const runs: [string, string[]][] = [
    ['validate', ['validate', dir]],
    ['explain', ['explain', '--policies', dir, '--request', request]],
    ['sim', ['sim', '--policies', dir, '--workload', workload, '--requests', '10']],
    ['serve', ['serve', '--policies', dir, '--port', '0', '--admin-port', '0']],
  ];
  for (const [name, args] of runs) {
    const r = await run(args);
    assert.equal(r.code, 1, `${name}: ${r.out}${r.err}`);
    assert.match(r.err, /zz-bomb\.yaml:3:\d+: YAML: Excessive alias count/, name);
    assert.doesNotMatch(r.err + r.out, STACK, name);
  }
  // A workload that is itself a bomb.
  const bombWorkload = join(dir, 'workload.yaml');
  writeFileSync(bombWorkload, BOMB.replace('kind: models', 'name: w'));
  const sim = await run(['sim', '--policies', policyDir(), '--workload', bombWorkload]);
  assert.equal(sim.code, 1, sim.err);
  assert.doesNotMatch(sim.err, STACK);
  assert.match(sim.err, /workload\.yaml:\d+:\d+: /);
});

test('sim --json prints the seed as a number', async () => {
  const r = await run(['sim', '--workload', join(ROOT, 'examples/workloads/chat.yaml'), '--requests', '20', '--seed', '7', '--json']);
  assert.equal(r.code, 0, r.err);
  assert.strictEqual(JSON.parse(r.out).seed, 7);
});
