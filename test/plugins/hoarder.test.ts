// A caged plugin that hoards memory, against the real router in a child
// process (the compiled CLI, as production runs it): when V8's own cap on a
// worker's heap is reached inside a runtime call, V8 may abort the whole
// process instead of the worker (nodejs/node#47224), so a test in this
// process could not even report it. The router must survive every hoarding
// request, quarantine the plugin with a log line and the metric, keep routing
// through the rest of the chain, and still shut down at once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { routingUrls, startChild, SWITCHYARD_BIN, waitUntil } from '../observe/process.ts';
import { pluginPolicyDir } from './plugin-policy.ts';

const REQUESTS = 30;

const hoarder = (keep: string) => `const kept = [];
export default {
  name: 'hoarder', version: '1.0.0', sdk: '^1',
  create() {
    return { pick(request, candidates) { kept.push(${keep}); return { replica: candidates[0].id, reason: 'hoarding ' + kept.length }; } };
  },
};
`;

for (const [what, keep] of [
  // 20 MB a pick, in calls that each stay well inside the time budget.
  ['20 MB a pick', 'new Array(2_621_440).fill(kept.length + 0.5)'],
  // 20 Mi numbers (160 MB) built by one runtime call that cannot be interrupted: on a 64 MB cap V8 aborted the process.
  ['20 Mi numbers in one call', 'new Array(20 * 1024 * 1024).fill(0)'],
  // Single calls past the whole headroom (64 MB budget + 256 MB): V8's cap is reached inside the call and V8 aborts
  // the process it is in. In a worker thread of the router's, that was the router (exit 134); in the plugin's own
  // process, it is that process.
  ['40 Mi numbers (320 MB) in one call', 'new Array(40 * 1024 * 1024).fill(0)'],
  ['2^26 numbers from Array.from in one call', 'Array.from({ length: 2 ** 26 }, (_, i) => i)'],
  ['a 128 MB JSON.parse in one call', "JSON.parse('[' + '0,'.repeat(64 * 1024 * 1024) + '0]')"],
] as const) {
  test(`a plugin keeping ${what} is quarantined; the router survives every request and shuts down at once`, { timeout: 240_000 }, async () => {
    const dir = pluginPolicyDir('sy-hoarder-', { hoarder: hoarder(keep) }, { strategies: '[hoarder, round-robin]', decisionHeaders: 'full' });
    const router = startChild(process.execPath, [SWITCHYARD_BIN, 'serve', '--policies', dir, '--port', '0', '--admin-port', '0', '--emulator-speed', '20'], {
      env: { NODE_OPTIONS: '' },
    });
    const alive = () => router.process.exitCode === null && router.process.signalCode === null;
    try {
      const { url, adminUrl } = await routingUrls(router);
      await waitUntil('the router to answer', async () => ((await fetch(`${url}/healthz`)).ok ? true : undefined), 60_000, router);
      const reasons: string[] = [];
      for (let i = 0; i < REQUESTS; i++) {
        const response = await fetch(`${url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'tiny', prompt: 'hello there', max_tokens: 1 }),
          signal: AbortSignal.timeout(30_000),
        }).catch((error: Error) =>
          assert.fail(
            `request ${i}: ${error.message} (the router ${alive() ? 'is up' : `exited: ${router.process.exitCode ?? router.process.signalCode}`})\n${router.output()}`,
          ),
        );
        await response.arrayBuffer();
        assert.equal(response.status, 200, `request ${i}`);
        reasons.push(response.headers.get('x-switchyard-reason') ?? '');
      }
      assert.ok(alive(), `the router died:\n${router.output()}`);
      // The rest of the chain routed once the hoarder was out.
      assert.match(reasons.at(-1)!, /^round-robin: /, reasons.join('\n'));
      const metrics = await waitUntil(
        'the quarantine metric',
        async () => {
          const text = await (await fetch(`${adminUrl}/metrics`)).text();
          return /switchyard_plugin_quarantined\{plugin="hoarder",reason="(memory|stuck)"\} 1/.test(text) ? text : undefined;
        },
        30_000,
        router,
      );
      assert.doesNotMatch(metrics, /reason="crashed"/);
      await waitUntil(
        'the quarantine log line',
        async () => (/plugin \S*hoarder\.mjs quarantined \((memory|stuck)\)/.test(router.output()) ? true : undefined),
        10_000,
        router,
      );

      const stopping = performance.now();
      await router.stop();
      const stopMs = performance.now() - stopping;
      assert.equal(router.process.exitCode, 0, router.output());
      assert.ok(stopMs < 4000, `shutdown took ${stopMs.toFixed(0)} ms`);
    } finally {
      await router.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
