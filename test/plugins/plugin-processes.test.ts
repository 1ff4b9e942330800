// Each caged plugin runs in a process of its own; none may outlive the
// router. The compiled router runs in a child process with two plugins: one
// idle, one whose worker is stuck in an endless loop of its own (started
// from a timer, so no call of the router's is waiting on it and nothing
// quarantines it). A SIGTERM stops the router at once (exit 0), a SIGKILL
// gives it no chance to clean up: either way both plugin processes end, and
// so does the spare kept ready for the next plugin, because each watches its
// pipe to the router and ends when it closes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { routingUrls, startChild, SWITCHYARD_BIN, waitUntil } from '../observe/process.ts';
import { pluginPolicyDir } from './plugin-policy.ts';

const IDLE = `export default {
  name: 'idle', version: '1.0.0', sdk: '^1',
  create() { return { pick: (_r, c) => ({ replica: c[0].id, reason: 'idle' }) }; },
};
`;
const SPINNER = `export default {
  name: 'spinner', version: '1.0.0', sdk: '^1',
  create() {
    setTimeout(() => { for (;;) {} }, 20);
    return { pick: () => ({ pass: true, reason: 'spinning' }) };
  },
};
`;

/** The stat line of every process whose parent is `ppid`: pid → its command line. */
function childrenOf(ppid: number): Map<number, string> {
  const found = new Map<number, string>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ')'.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === ppid) found.set(Number(name), readFileSync(`/proc/${name}/cmdline`, 'utf8').replaceAll('\0', ' '));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** Gone, or a zombie waiting to be reaped (it runs nothing). */
function gone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
  test(`after ${signal} to the router no plugin process is left, not even one stuck in a loop`, { timeout: 120_000 }, async () => {
    const dir = pluginPolicyDir('sy-plugin-processes-', { idle: IDLE, spinner: SPINNER }, { strategies: '[spinner, idle, round-robin]' });
    const router = startChild(process.execPath, [SWITCHYARD_BIN, 'serve', '--policies', dir, '--port', '0', '--admin-port', '0', '--emulator-speed', '20'], {
      env: { NODE_OPTIONS: '' },
    });
    const exited = new Promise<void>((resolve) => router.process.once('exit', () => resolve()));
    try {
      const { url } = await routingUrls(router);
      await waitUntil('the router to answer', async () => ((await fetch(`${url}/healthz`)).ok ? true : undefined), 60_000, router);
      const plugins = await waitUntil(
        'both plugin processes and the spare',
        async () => {
          const found = [...childrenOf(router.process.pid!)].filter(([, cmdline]) => /switchyard-cage\/child\.\w+\.mjs/.test(cmdline));
          // Two plugins and the spare process kept ready for the next one (core/plugins/cage/plugin-process.ts).
          return found.length >= 3 ? found.map(([pid]) => pid) : undefined;
        },
        30_000,
        router,
      );
      const stopping = performance.now();
      router.process.kill(signal);
      await exited;
      const stopMs = performance.now() - stopping;
      if (signal === 'SIGTERM') {
        assert.equal(router.process.exitCode, 0, router.output());
        assert.ok(stopMs < 4000, `shutdown took ${stopMs.toFixed(0)} ms`);
      }
      await waitUntil('the plugin processes to end', async () => (plugins.every(gone) ? true : undefined), 15_000);
    } finally {
      await router.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('SWITCHYARD_PLUGIN_ISOLATION=thread runs plugins in worker threads of the router: no plugin process', { timeout: 120_000 }, async () => {
  const dir = pluginPolicyDir('sy-plugin-processes-', { idle: IDLE }, { strategies: '[idle, round-robin]', decisionHeaders: 'full' });
  const router = startChild(process.execPath, [SWITCHYARD_BIN, 'serve', '--policies', dir, '--port', '0', '--admin-port', '0', '--emulator-speed', '20'], {
    env: { NODE_OPTIONS: '', SWITCHYARD_PLUGIN_ISOLATION: 'thread' },
  });
  try {
    const { url } = await routingUrls(router);
    await waitUntil('the router to answer', async () => ((await fetch(`${url}/healthz`)).ok ? true : undefined), 60_000, router);
    // The caged plugin answers (the first request may find it not yet warm).
    await waitUntil(
      'the plugin to pick',
      async () => {
        const response = await fetch(`${url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'tiny', prompt: 'hello there', max_tokens: 1 }),
        });
        await response.arrayBuffer();
        return response.headers.get('x-switchyard-reason') === 'idle: idle' ? true : undefined;
      },
      30_000,
      router,
    );
    const plugins = [...childrenOf(router.process.pid!).values()].filter((cmdline) => /switchyard-cage\/child\.\w+\.mjs/.test(cmdline));
    assert.deepEqual(plugins, []);
  } finally {
    await router.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
