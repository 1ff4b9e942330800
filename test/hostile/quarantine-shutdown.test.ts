// Shutdown after quarantines, as an operator sees it: the compiled router in
// a child process with one caged plugin per pool, each quarantined for a
// different reason (a loop: stuck; a hoarder: memory; a console flood:
// flooding; a worker that exits: crashed), a keep-alive client still
// connected, then SIGTERM. A report had shutdown take 10 s after a
// quarantine (25 ms otherwise); this bounds it, and prints the figure.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { OPEN_TENANTS } from '../helpers/router.ts';
import { routingUrls, startChild, SWITCHYARD_BIN, waitUntil } from '../observe/process.ts';

const plugin = (name: string, pick: string, top = '') => `${top}
export default {
  name: '${name}', version: '1.0.0', sdk: '^1',
  create() {
    return { pick(request, candidates) { ${pick} } };
  },
};
`;

const PLUGINS = {
  looper: { reason: 'stuck', code: plugin('looper', 'for (;;) {}') },
  hoarder: {
    reason: 'memory',
    code: plugin(
      'hoarder',
      "kept.push(new Array(2_621_440).fill(kept.length + 0.5)); return { replica: candidates[0].id, reason: 'hoarding' };",
      'const kept = [];',
    ),
  },
  chatty: { reason: 'flooding', code: plugin('chatty', "for (let i = 0; i < 5000; i++) console.log('spam', i); return { pass: true, reason: 'said a lot' };") },
  quitter: { reason: 'crashed', code: plugin('quitter', 'process.exit(3);') },
} as const;

test('SIGTERM after plugins were quarantined (stuck, memory, flooding, crashed) with a keep-alive client connected: the router exits 0 at once', {
  timeout: 240_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-quarantine-stop-'));
  mkdirSync(join(dir, 'plugins'));
  const names = Object.keys(PLUGINS) as (keyof typeof PLUGINS)[];
  for (const name of names) writeFileSync(join(dir, 'plugins', `${name}.mjs`), PLUGINS[name].code);
  writeFileSync(join(dir, 'models.yaml'), `kind: models\nmodels:\n${names.map((n) => `  - id: m-${n}\n    versions: [{ version: v1 }]\n`).join('')}`);
  writeFileSync(join(dir, 'tenants.yaml'), OPEN_TENANTS);
  writeFileSync(join(dir, 'settings.yaml'), 'kind: settings\nplugin_dirs: [plugins]\n');
  writeFileSync(
    join(dir, 'pools.yaml'),
    `kind: pools\npools:\n${names.map((n) => `  - name: p-${n}\n    model: m-${n}\n    version: v1\n    strategies: [${n}, round-robin]\n    replicas:\n      - { id: ${n}-0, url: "emulate://tiny" }\n`).join('')}`,
  );
  const router = startChild(process.execPath, [SWITCHYARD_BIN, 'serve', '--policies', dir, '--port', '0', '--admin-port', '0', '--emulator-speed', '20'], {
    env: { NODE_OPTIONS: '' },
  });
  // One keep-alive connection, as an SDK client holds it.
  const client = new Agent({ connections: 1, keepAliveTimeout: 60_000 });
  try {
    const { url, adminUrl } = await routingUrls(router);
    await waitUntil('the router to answer', async () => ((await fetch(`${url}/healthz`)).ok ? true : undefined), 60_000, router);
    const metricsText = async () => (await fetch(`${adminUrl}/metrics`)).text();
    for (const name of names) {
      await waitUntil(
        `${name} to be quarantined (${PLUGINS[name].reason})`,
        async () => {
          const r = await request(`${url}/v1/completions`, {
            method: 'POST',
            dispatcher: client,
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model: `m-${name}`, prompt: 'hello there', max_tokens: 1 }),
          });
          await r.body.dump();
          assert.equal(r.statusCode, 200, `${name}: the chain routes on`);
          return new RegExp(`switchyard_plugin_quarantined\\{plugin="${name}",reason="${PLUGINS[name].reason}"\\} 1`).test(await metricsText())
            ? true
            : undefined;
        },
        90_000,
        router,
      );
    }
    // The keep-alive connection is open and idle when the signal comes.
    const stopping = performance.now();
    await router.stop();
    const stopMs = performance.now() - stopping;
    console.log(`SIGTERM to exit after ${names.length} quarantines: ${stopMs.toFixed(0)} ms`);
    assert.equal(router.process.exitCode, 0, router.output());
    assert.ok(stopMs < 4000, `shutdown took ${stopMs.toFixed(0)} ms\n${router.output()}`);
  } finally {
    await router.stop();
    await client.close().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
});
