// PolicyStore: last-known-good, content hashing, drain-aware disposal and
// strategy state carried over a reload.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, afterEach, test } from 'node:test';
import { PluginLoader } from '../../core/plugins/loader.ts';
import { PolicyStore, type PolicyStoreOptions } from '../../core/decide/store.ts';
import type { ServedPolicy } from '../../core/serve/server.ts';
import { chainBlockHashes } from '../../sdk/prefix.ts';
import { fleet, request } from '../../sdk/testkit/index.ts';
import type { ReplicaPick } from '../../sdk/types.ts';
import { cleanup, pluginSource, poolsYaml, tempDir, write, writePolicy } from '../plugins/fixtures.ts';
import { countingStrategy, recordOutcomes, type Ledger } from './helpers.ts';
import { PolicyError } from '../../core/diagnostics/problem.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';

const stores: PolicyStore[] = [];
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
});
after(cleanup);

async function open(dir: string, options: Partial<Omit<PolicyStoreOptions, 'builtins'>> = {}): Promise<PolicyStore> {
  const loader = options.loader ?? new PluginLoader({ builtins: BUILTIN_STRATEGIES, cacheDir: tempDir('switchyard-plugin-cache-') });
  const store = await PolicyStore.open({ ...options, dir, loader });
  stores.push(store);
  return store;
}

test('a broken policy keeps the last-known-good snapshot and reports FILE:LINE:COL', async () => {
  const dir = tempDir();
  writePolicy(dir);
  const store = await open(dir);
  const good = store.current();
  const outcomes = recordOutcomes(store);

  write(join(dir, 'pools.yaml'), poolsYaml().replace('version: v1', 'version: v9'));
  const failed = await store.reload('test');
  assert.equal(failed.result, 'refused');
  assert.match(failed.errors.join('\n'), /pools\.yaml:5:14: "test-model" has no version "v9"/);
  assert.equal(store.current(), good, 'the same snapshot object stays live');
  assert.equal(store.status().generation, 1);
  assert.equal(store.status().lastError?.errors[0], failed.errors[0]);

  // The same broken input again: refused again, with the same problems (reported, not rebuilt).
  const again = await store.reload('again');
  assert.equal(again.result, 'refused');
  assert.deepEqual(again.errors, failed.errors);
  assert.equal(store.status().disk.matchesLive, false);
  assert.deepEqual(store.status().disk.errors, failed.errors);

  write(join(dir, 'pools.yaml'), poolsYaml(undefined, ['a', 'b', 'c']));
  const fixed = await store.reload('fixed');
  assert.equal(fixed.result, 'live');
  assert.equal(store.current().generation, 2);
  assert.deepEqual([...store.current().replicas.keys()], ['a', 'b', 'c']);
  assert.deepEqual(
    outcomes.map((o) => o.result),
    ['refused', 'refused', 'live'],
  );
  assert.deepEqual(store.status().reloads, { live: 2, unchanged: 0, refused: 2 });
  // The files are good again: the old error is gone and disk matches live.
  assert.equal(store.status().lastError, undefined);
  assert.deepEqual(store.status().disk.errors, []);
  assert.equal(store.status().disk.matchesLive, true);
});

test('the first load fails with every problem: there is nothing to fall back on', async () => {
  const dir = tempDir();
  writePolicy(dir, { strategies: '[no-such-strategy]' });
  await assert.rejects(
    open(dir),
    (error: unknown) => error instanceof PolicyError && /pools\.yaml:6:\d+: strategy "no-such-strategy" is not registered/.test(error.message),
  );
});

test('a save that changes nothing does nothing: no new generation, no swap, no new strategy instances', async () => {
  const dir = tempDir();
  writePolicy(dir);
  const store = await open(dir);
  let swaps = 0;
  store.on('swap', () => swaps++);
  const before = store.current();
  write(join(dir, 'pools.yaml'), poolsYaml());
  write(join(dir, 'models.yaml'), 'kind: models\nmodels:\n  - id: test-model\n    versions:\n      - version: v1\n');
  const outcome = await store.reload('touch');
  assert.equal(outcome.result, 'unchanged');
  assert.equal(store.current(), before);
  assert.equal(swaps, 0);
});

test('replaced strategies are disposed exactly once, after the last request on the old snapshot released it', async () => {
  const dir = tempDir();
  const ledger: Ledger = { created: 0, disposed: new Map() };
  writePolicy(dir, { strategies: '[counting, power-of-two]' });
  const store = await open(dir, { loader: new PluginLoader({ cacheDir: tempDir(), builtins: [...BUILTIN_STRATEGIES, countingStrategy(ledger)] }) });
  const disposedEvents: number[] = [];
  store.on('disposed', (e) => disposedEvents.push(e.generation));

  const early = store.acquire();
  const late = store.acquire();
  assert.equal(early.snapshot.generation, 1);
  write(join(dir, 'pools.yaml'), poolsYaml('[counting, power-of-two]', ['a', 'b', 'c']));
  assert.equal((await store.reload('change')).result, 'live');
  assert.equal(store.acquire().snapshot.generation, 2, 'a new request gets the new snapshot');
  assert.equal(early.snapshot.generation, 1, 'a request in flight keeps the snapshot it started on');
  assert.deepEqual(store.status().draining, [{ generation: 1, inFlight: 2 }]);

  early.release();
  early.release(); // twice: no effect
  assert.equal(ledger.disposed.size, 0, 'one request still holds generation 1');
  late.release();
  assert.deepEqual([...ledger.disposed], [[1, 1]], 'instance 1 disposed once');
  assert.deepEqual(disposedEvents, [1]);
  assert.deepEqual(store.status().draining, []);
  late.release();
  assert.deepEqual([...ledger.disposed], [[1, 1]]);
});

test('a snapshot held past the drain timeout is disposed anyway, once', async () => {
  const dir = tempDir();
  const ledger: Ledger = { created: 0, disposed: new Map() };
  writePolicy(dir, { strategies: '[counting]' });
  const store = await open(dir, {
    drainTimeoutMs: 20,
    loader: new PluginLoader({ cacheDir: tempDir(), builtins: [...BUILTIN_STRATEGIES, countingStrategy(ledger)] }),
  });
  const forced: boolean[] = [];
  store.on('disposed', (e) => forced.push(e.forced));
  const stuck = store.acquire();
  write(join(dir, 'pools.yaml'), poolsYaml('[counting]', ['a']));
  await store.reload('change');
  await new Promise((resolve) => setTimeout(resolve, 60));
  assert.deepEqual(forced, [true]);
  stuck.release();
  assert.deepEqual([...ledger.disposed], [[1, 1]]);
});

test('close() disposes the live snapshot once its requests are done', async () => {
  const dir = tempDir();
  const ledger: Ledger = { created: 0, disposed: new Map() };
  writePolicy(dir, { strategies: '[counting]' });
  const store = await PolicyStore.open({ dir, loader: new PluginLoader({ cacheDir: tempDir(), builtins: [...BUILTIN_STRATEGIES, countingStrategy(ledger)] }) });
  const lease = store.acquire();
  await store.close();
  assert.equal(ledger.disposed.size, 0);
  lease.release();
  assert.deepEqual([...ledger.disposed], [[1, 1]]);
});

test('strategy state carries over a reload: the prefix memory survives a policy change', async () => {
  const dir = tempDir();
  writePolicy(dir, { strategies: '[prefix-affinity]', replicas: ['a', 'b', 'c'] });
  const store = await open(dir);
  const prompt = request({ prefixHashes: chainBlockHashes([1, 2, 3, 4], 'test-model') });
  store.current().pools[0].chain[0].instance.onRouted?.(prompt, 'c');

  write(join(dir, 'pools.yaml'), poolsYaml('[prefix-affinity]', ['a', 'b', 'c', 'd']));
  assert.equal((await store.reload('add a replica')).result, 'live');
  const pick = store.current().pools[0].chain[0].instance.pick(
    prompt,
    fleet(4, (i) => ({ id: 'abcd'[i] })),
  ) as ReplicaPick;
  assert.equal(pick.replica, 'c');
  assert.match(pick.reason, /holds 4 of 4 prefix blocks/);
});

test('a plugin edited without a version bump keeps its state; a new version starts empty', async () => {
  const dir = tempDir();
  const stateful = (version: string, note: string) =>
    pluginSource('stateful', {
      version,
      extra: `/* ${note} */`,
    }).replace(
      /create\(config\) \{[\s\S]*$/,
      `create(_config, ctx) {
    const state = ctx.previousState?.kind === 'stateful' ? ctx.previousState : { kind: 'stateful', routed: 0 };
    return {
      pick: (_request, candidates) => (candidates.length ? { replica: candidates[0].id, reason: 'routed ' + state.routed } : null),
      onRouted: () => { state.routed++; },
      exportState: () => state,
    };
  },
};
`,
    );
  write(join(dir, 'plugins', 'stateful.mjs'), stateful('1.0.0', 'first'));
  writePolicy(dir, { pluginDirs: ['plugins'], strategies: '[stateful]' });
  const store = await open(dir);
  const reasonNow = () => (store.current().pools[0].chain[0].instance.pick(request(), fleet(1)) as ReplicaPick).reason;
  for (let i = 0; i < 3; i++) store.current().pools[0].chain[0].instance.onRouted?.(request(), 'a');

  write(join(dir, 'plugins', 'stateful.mjs'), stateful('1.0.0', 'a bug fix'));
  assert.equal((await store.reload('plugin edited')).result, 'live');
  assert.equal(reasonNow(), 'routed 3');

  write(join(dir, 'plugins', 'stateful.mjs'), stateful('2.0.0', 'a new state shape'));
  assert.equal((await store.reload('plugin bumped')).result, 'live');
  assert.equal(reasonNow(), 'routed 0');
  assert.deepEqual(
    store.status().plugins.map((p) => `${p.name}@${p.version}`),
    ['stateful@2.0.0'],
  );
});

test('a broken plugin keeps the last-known-good snapshot with its working plugin', async () => {
  const dir = tempDir();
  write(join(dir, 'plugins', 'mine.ts'), pluginSource('mine', { typed: true }));
  writePolicy(dir, { pluginDirs: ['plugins'], strategies: '[mine]' });
  const store = await open(dir);
  write(join(dir, 'plugins', 'mine.ts'), pluginSource('mine', { typed: true }).replace('create(', 'create(('));
  const outcome = await store.reload('broken plugin');
  assert.equal(outcome.result, 'refused');
  assert.match(outcome.errors.join('\n'), /plugins\/mine\.ts:\d+:\d+: does not compile/);
  assert.equal((store.current().pools[0].chain[0].instance.pick(request(), fleet(1)) as ReplicaPick).reason, 'mine');
});

test('a new broken plugin file is reported, and a different mistake in it is reported again', async () => {
  const dir = tempDir();
  writePolicy(dir, { pluginDirs: ['plugins'] });
  write(join(dir, 'plugins', '.keep'), '');
  const store = await open(dir);
  write(join(dir, 'plugins', 'draft.ts'), 'export default {');
  const first = await store.reload('new file');
  assert.equal(first.result, 'refused');
  assert.match(first.errors.join('\n'), /draft\.ts:1:17: does not compile/);
  write(join(dir, 'plugins', 'draft.ts'), "export default { name: 'draft' };");
  const second = await store.reload('edited');
  assert.equal(second.result, 'refused');
  assert.match(second.errors.join('\n'), /draft\.ts:1:1: not a strategy definition: "version" must be a string/);
  assert.equal(store.current().generation, 1);
});

test('reloads run one at a time; calls made meanwhile share the next run', async () => {
  const dir = tempDir();
  writePolicy(dir);
  const store = await open(dir);
  const outcomes = recordOutcomes(store);
  write(join(dir, 'pools.yaml'), poolsYaml(undefined, ['x']));
  const running = store.reload('one');
  await new Promise((resolve) => setImmediate(resolve)); // 'one' has started reading
  const results = await Promise.all([running, store.reload('two'), store.reload('three')]);
  assert.equal(results[1], results[2], 'the second and third call share a run');
  assert.deepEqual(
    outcomes.map((o) => `${o.reason}: ${o.result}`),
    ['one: live', 'two: unchanged'],
  );
  assert.equal(store.current().generation, 2);
});

test('acquire and release cost well under a microsecond', async () => {
  const dir = tempDir();
  writePolicy(dir);
  const store = await open(dir);
  const n = 200_000;
  const started = performance.now();
  for (let i = 0; i < n; i++) store.acquire().release();
  const perCallUs = ((performance.now() - started) / n) * 1000;
  console.log(`acquire+release: ${perCallUs.toFixed(3)} µs`);
  assert.ok(perCallUs < 2, `${perCallUs} µs`);
});

test('the store is what `serve` takes as its policy source', async () => {
  const dir = tempDir();
  writePolicy(dir);
  const store = await open(dir);
  const served: ServedPolicy = store;
  const generations: number[] = [];
  served.onSwap?.((snapshot) => generations.push(snapshot.generation));
  write(join(dir, 'pools.yaml'), poolsYaml(undefined, ['n']));
  assert.equal((await served.reload!('admin')).result, 'live');
  assert.deepEqual(generations, [2]);
  assert.equal(served.status!().generation, 2);
});
