// Reload on file changes (chokidar): plain writes, editors' temp-file-then-
// rename saves, Kubernetes ConfigMap `..data` symlink swaps, half-written
// files, and plugin directories.
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, afterEach, test } from 'node:test';
import { PluginLoader } from '../../core/plugins/loader.ts';
import { PolicyStore } from '../../core/decide/store.ts';
import { fleet, request } from '../../sdk/testkit/index.ts';
import type { ReplicaPick } from '../../sdk/types.ts';
import { cleanup, modelsYaml, pluginSource, poolsYaml, tempDir, write, writePolicy } from '../plugins/fixtures.ts';
import { recordOutcomes, sleep, waitFor } from './helpers.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';

const DEBOUNCE_MS = 30;
const stores: PolicyStore[] = [];
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
});
after(cleanup);

async function watched(dir: string): Promise<PolicyStore> {
  // Reload tests, not cage tests: a loaded machine must not make a plugin miss its (default 20 ms) budget here.
  const store = await PolicyStore.open({
    dir,
    debounceMs: DEBOUNCE_MS,
    loader: new PluginLoader({ builtins: BUILTIN_STRATEGIES, cacheDir: tempDir('switchyard-plugin-cache-'), cage: { callTimeoutMs: 5000 } }),
  });
  if (process.env.DEBUG_RELOAD) store.on('reload', (o) => console.log('reload', o.reason, o.result, o.errors));
  stores.push(store);
  await store.watch();
  return store;
}

const replicaIds = (store: PolicyStore) => [...store.current().replicas.keys()].join(',');

test('a saved change is live within a second, as one reload', async () => {
  const dir = tempDir();
  writePolicy(dir);
  const store = await watched(dir);
  const outcomes = recordOutcomes(store);
  write(join(dir, 'pools.yaml'), poolsYaml(undefined, ['a', 'b', 'c']));
  const ms = await waitFor('generation 2', () => store.current().generation === 2, 1000);
  console.log(`write → live: ${ms.toFixed(0)} ms (debounce ${DEBOUNCE_MS} ms)`);
  assert.equal(replicaIds(store), 'a,b,c');
  await sleep(DEBOUNCE_MS * 3);
  assert.deepEqual(
    outcomes.map((o) => o.result),
    ['live'],
  );
});

test('an editor save (write a temp file, rename it over the original) is picked up', async () => {
  const dir = tempDir();
  writePolicy(dir);
  const store = await watched(dir);
  writeFileSync(join(dir, '.pools.yaml.swp'), poolsYaml(undefined, ['x', 'y']));
  renameSync(join(dir, '.pools.yaml.swp'), join(dir, 'pools.yaml'));
  await waitFor('the renamed file', () => replicaIds(store) === 'x,y', 1000);
  // Vim-style: the original moved aside, the new one written, the backup removed.
  renameSync(join(dir, 'pools.yaml'), join(dir, 'pools.yaml~'));
  writeFileSync(join(dir, 'pools.yaml'), poolsYaml(undefined, ['z']));
  rmSync(join(dir, 'pools.yaml~'));
  await waitFor('the rewritten file', () => replicaIds(store) === 'z', 1000);
});

test('a Kubernetes ConfigMap update (the ..data symlink swapped to a new folder) is picked up; the churn is not a change', async () => {
  const dir = tempDir();
  // What the kubelet mounts: files are links through ..data to a timestamped folder.
  const version = (name: string, replicas: string[]) => {
    mkdirSync(join(dir, name));
    write(join(dir, name, 'settings.yaml'), 'kind: settings\n');
    write(join(dir, name, 'models.yaml'), modelsYaml());
    write(join(dir, name, 'pools.yaml'), poolsYaml(undefined, replicas));
  };
  version('..2026_01_01_00_00_00.1', ['a']);
  symlinkSync('..2026_01_01_00_00_00.1', join(dir, '..data'));
  for (const file of ['settings.yaml', 'models.yaml', 'pools.yaml']) symlinkSync(join('..data', file), join(dir, file));
  const store = await watched(dir);
  const outcomes = recordOutcomes(store);
  assert.equal(replicaIds(store), 'a');

  const swap = (name: string) => {
    symlinkSync(name, join(dir, '..data_tmp'));
    renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
  };
  version('..2026_01_01_00_01_00.2', ['a', 'b']);
  swap('..2026_01_01_00_01_00.2');
  rmSync(join(dir, '..2026_01_01_00_00_00.1'), { recursive: true });
  await waitFor('the new ConfigMap version', () => replicaIds(store) === 'a,b', 1000);

  // A new ConfigMap version with the same content (an annotation changed): nothing to do.
  version('..2026_01_01_00_02_00.3', ['a', 'b']);
  swap('..2026_01_01_00_02_00.3');
  rmSync(join(dir, '..2026_01_01_00_01_00.2'), { recursive: true });
  await waitFor('a reload check', () => outcomes.length >= 2, 1000);
  await sleep(DEBOUNCE_MS * 3);
  assert.deepEqual(
    outcomes.map((o) => o.result),
    ['live', 'unchanged'],
  );
  assert.equal(store.current().generation, 2);
});

test('a half-written file is never applied: invalid YAML is refused, a slow writer is waited for', async () => {
  const dir = tempDir();
  writePolicy(dir);
  const store = await watched(dir);
  const outcomes = recordOutcomes(store);
  const swapped: string[] = [];
  store.on('swap', ({ snapshot }) => swapped.push([...snapshot.replicas.keys()].join(',')));
  const full = poolsYaml(undefined, ['a', 'b', 'c']);

  // Cut inside a flow mapping: not YAML yet.
  const cut = full.indexOf('{ id: c') + 12;
  writeFileSync(join(dir, 'pools.yaml'), full.slice(0, cut));
  await waitFor('the partial file to be checked', () => outcomes.length === 1, 1000);
  assert.equal(outcomes[0].result, 'refused');
  assert.match(outcomes[0].errors.join('\n'), /pools\.yaml:\d+:\d+: YAML syntax/);
  assert.equal(store.current().generation, 1, 'last-known-good stays');

  writeFileSync(join(dir, 'pools.yaml'), full);
  await waitFor('the complete file', () => store.current().generation === 2, 1000);

  // A writer that pauses between chunks (shorter than the debounce): only the whole file is ever read.
  const next = poolsYaml(undefined, ['d', 'e', 'f', 'g']);
  const third = Math.floor(next.length / 3);
  writeFileSync(join(dir, 'pools.yaml'), next.slice(0, third));
  let longestPause = 0;
  for (const chunk of [next.slice(third, 2 * third), next.slice(2 * third)]) {
    const before = performance.now();
    await sleep(DEBOUNCE_MS / 3);
    writeFileSync(join(dir, 'pools.yaml'), chunk, { flag: 'a' });
    longestPause = Math.max(longestPause, performance.now() - before);
  }
  await waitFor('the slowly written file', () => store.current().generation === 3, 1000);
  assert.deepEqual(swapped, ['a,b,c', 'd,e,f,g']);
  // The promise holds for pauses shorter than the debounce. On a starved CPU
  // a 10 ms sleep can last longer than that; then the partial file may be
  // read (and refused, never applied), which is what `swapped` checks.
  const results = outcomes.map((o) => o.result);
  if (longestPause < DEBOUNCE_MS) assert.deepEqual(results, ['refused', 'live', 'live']);
  else
    assert.deepEqual(
      results.filter((r) => r === 'live'),
      ['live', 'live'],
      `pause ${longestPause.toFixed(0)} ms: ${results.join(', ')}`,
    );
});

test('plugin directories are watched, including one a settings change adds', async () => {
  const dir = tempDir();
  write(join(dir, 'plugins', 'mine.mjs'), pluginSource('mine'));
  writePolicy(dir, { pluginDirs: ['plugins'], strategies: '[mine]' });
  const store = await watched(dir);
  const reason = () => (store.current().pools[0].chain[0].instance.pick(request(), fleet(1)) as ReplicaPick).reason;
  assert.equal(reason(), 'mine');

  write(join(dir, 'plugins', 'mine.mjs'), pluginSource('mine').replace("default: 'mine'", "default: 'mine, edited'"));
  await waitFor('the edited plugin', () => reason() === 'mine, edited', 15_000);

  // A second plugin folder named by the settings: watched from the swap on.
  write(join(dir, 'more', 'theirs.mjs'), pluginSource('theirs'));
  writePolicy(dir, { pluginDirs: ['plugins', 'more'], strategies: '[theirs]' });
  await waitFor('the second plugin folder', () => reason() === 'theirs', 15_000);
  await waitFor('the watcher to follow', () => (store.status().watching || []).length === 3, 15_000);
  write(join(dir, 'more', 'theirs.mjs'), pluginSource('theirs').replace("default: 'theirs'", "default: 'theirs, edited'"));
  await waitFor('the edited plugin in the new folder', () => reason() === 'theirs, edited', 15_000);
});

test('close() stops watching: later writes change nothing', async () => {
  const dir = tempDir();
  writePolicy(dir);
  const store = await watched(dir);
  const outcomes = recordOutcomes(store);
  await store.close();
  write(join(dir, 'pools.yaml'), poolsYaml(undefined, ['q']));
  await sleep(DEBOUNCE_MS * 4);
  assert.deepEqual(outcomes, []);
  assert.equal(store.status().watching, false);
});

test('the example plugin, copied into the watched plugin folder of a running store, is used without a restart', async () => {
  const dir = tempDir();
  mkdirSync(join(dir, 'plugins'));
  writePolicy(dir, { pluginDirs: ['plugins'] });
  const store = await watched(dir);
  copyFileSync(new URL('../../examples/plugins/least-kv.ts', import.meta.url), join(dir, 'plugins', 'least-kv.ts'));
  await waitFor('the plugin to load', () => store.plugins.some((p) => p.name === 'least-kv'), 2000);
  write(join(dir, 'pools.yaml'), poolsYaml('[least-kv]'));
  await waitFor('a pool using it', () => store.current().pools[0].chain[0].name === 'least-kv', 1000);
  const pick = store.current().pools[0].chain[0].instance.pick(
    request(),
    fleet(2, (i) => ({ kvUsage: [0.6, 0.1][i] })),
  ) as ReplicaPick;
  assert.match(pick.reason, /most free KV cache/);
  assert.equal(pick.replica, 'r1');
});

test("editors' temp files (sed -i, vim's 4913 and .swp, ~ backups) are never named as changes, and alone cause no reload", async () => {
  const dir = tempDir();
  writePolicy(dir);
  const store = await watched(dir);
  const outcomes = recordOutcomes(store);
  for (const name of ['sedLmAWW0', '4913', '.pools.yaml.swp', 'pools.yaml~', '#pools.yaml#', 'notes.txt']) writeFileSync(join(dir, name), 'junk: [');
  await sleep(DEBOUNCE_MS * 6);
  assert.equal(outcomes.length, 0, 'nothing that could be policy changed');

  // sed -i: a temp file written, then renamed over the policy file.
  writeFileSync(join(dir, 'sedXy12Ab'), poolsYaml(undefined, ['s1']));
  renameSync(join(dir, 'sedXy12Ab'), join(dir, 'pools.yaml'));
  await waitFor('the sed edit', () => replicaIds(store) === 's1', 2000);
  await sleep(DEBOUNCE_MS * 3);
  const named = outcomes.map((o) => o.reason).join(' | ');
  assert.match(named, /pools\.yaml/);
  assert.doesNotMatch(named, /sed|4913|\.swp|~|#|notes/, named);
});
