// The routing table from a control plane (docs/hot-reload.md): polled
// with ETag, last good table kept through outages and bad answers, saved to
// disk for a restart during an outage. Against a real HTTP server on loopback.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, afterEach, test } from 'node:test';
import { PluginLoader } from '../../core/plugins/loader.ts';
import { PolicyStore } from '../../core/decide/store.ts';
import { cleanup, tempDir, write, writePolicy } from '../plugins/fixtures.ts';
import { recordOutcomes, sleep, waitFor } from './helpers.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';

const TTL_MS = 30;

/** A control plane: serves `body` with an ETag, or fails the way `mode` says. */
class FakeControlPlane {
  body = '';
  mode: 'serve' | 'drop' | 'error' = 'serve';
  requests = 0;
  notModified = 0;
  readonly #server: Server;
  constructor() {
    this.#server = createServer((req, res) => {
      this.requests++;
      if (this.mode === 'drop') return void req.socket.destroy();
      if (this.mode === 'error') return void res.writeHead(503).end('maintenance');
      const etag = `"${createHash('sha256').update(this.body).digest('hex').slice(0, 16)}"`;
      if (req.headers['if-none-match'] === etag) {
        this.notModified++;
        return void res.writeHead(304, { etag }).end();
      }
      res.writeHead(200, { 'content-type': 'application/yaml', etag }).end(this.body);
    });
  }
  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/routing-table`;
  }
  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
  }
}

const table = (replicas: string[], pool = 'general') =>
  [
    'kind: routing-table',
    'version: "2026-05-01.1"',
    'models:',
    '  - id: test-model',
    '    versions: [{ version: v1 }]',
    'pools:',
    `  - name: ${pool}`,
    '    model: test-model',
    '    version: v1',
    '    replicas:',
    ...replicas.map((id, i) => `      - { id: ${id}, url: "http://10.0.0.${i + 1}:8000" }`),
    '',
  ].join('\n');

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});
after(cleanup);

async function controlPlane(body: string): Promise<{ cp: FakeControlPlane; url: string }> {
  const cp = new FakeControlPlane();
  cp.body = body;
  const url = await cp.start();
  cleanups.push(() => cp.stop());
  return { cp, url };
}

/** Local files: settings, and pool rules that need a pool named "general". */
function localPolicy(): string {
  const dir = tempDir();
  writePolicy(dir, { withoutTable: true });
  write(join(dir, 'rules.yaml'), 'kind: rules\npool_rules:\n  default_pool: general\n  rules: []\n');
  return dir;
}

async function open(dir: string, url: string, cacheFile: string): Promise<PolicyStore> {
  const store = await PolicyStore.open({
    dir,
    loader: new PluginLoader({ builtins: BUILTIN_STRATEGIES, cacheDir: tempDir() }),
    controlPlane: { url, ttlMs: TTL_MS, timeoutMs: 1000, cacheFile },
  });
  cleanups.push(() => store.close());
  return store;
}

const replicaIds = (store: PolicyStore) => [...store.current().replicas.keys()].join(',');

test('the routing table comes from the control plane, joined to the local policy; an unchanged table costs a 304', async () => {
  const { cp, url } = await controlPlane(table(['a', 'b']));
  const cacheFile = join(tempDir(), 'table.json');
  const store = await open(localPolicy(), url, cacheFile);
  assert.equal(replicaIds(store), 'a,b');
  const status = store.status().controlPlane!;
  assert.equal(status.state, 'ok');
  assert.equal(status.tableFrom, 'network');
  assert.equal(status.tableVersion, '2026-05-01.1');
  assert.equal(status.tableInUse, status.tableHash);
  assert.ok(existsSync(cacheFile), 'the good table is saved');

  await waitFor('two polls answered 304', () => cp.notModified >= 2, 1000);
  assert.equal(store.current().generation, 1);

  cp.body = table(['a', 'b', 'c']);
  await waitFor('the new table', () => replicaIds(store) === 'a,b,c', 1000);
  assert.equal(store.current().generation, 2);
});

test('an unreachable or failing control plane keeps the last good table, says so, and local changes still apply', async () => {
  const { cp, url } = await controlPlane(table(['a', 'b']));
  const dir = localPolicy();
  const store = await open(dir, url, join(tempDir(), 'table.json'));
  const states: string[] = [];
  store.on('control-plane', (s) => states.push(s.state));

  cp.mode = 'drop';
  await waitFor('unreachable', () => store.status().controlPlane!.state === 'unreachable', 1000);
  assert.match(store.status().controlPlane!.errors[0], /routing-table: unreachable: .*keeping the last good table/);
  assert.equal(replicaIds(store), 'a,b');

  write(join(dir, 'settings.yaml'), 'kind: settings\nmax_staleness_ms: 2500\n');
  assert.equal((await store.reload('local edit during the outage')).result, 'live');
  assert.equal(store.current().settings.maxStalenessMs, 2500);
  assert.equal(replicaIds(store), 'a,b', 'built with the last good table');

  cp.mode = 'error';
  await sleep(TTL_MS * 3);
  assert.match(store.status().controlPlane!.errors[0], /HTTP 503/);

  cp.mode = 'serve';
  await waitFor('back to ok', () => store.status().controlPlane!.state === 'ok', 1000);
  // One event per change of state or of error text (a dropped connection, then HTTP 503), then ok.
  assert.equal(states.at(-1), 'ok');
  assert.ok(states.length >= 3 && states.slice(0, -1).every((state) => state === 'unreachable'), states.join(', '));
});

test('an invalid table is refused with URL:LINE:COL; one the local policy cannot use is rejected; the last good table stays', async () => {
  const { cp, url } = await controlPlane(table(['a']));
  const store = await open(localPolicy(), url, join(tempDir(), 'table.json'));
  const outcomes = recordOutcomes(store);

  cp.body = table(['a']).replace('version: v1\n    replicas', 'version: v1\n    replics');
  await waitFor('invalid', () => store.status().controlPlane!.state === 'invalid', 1000);
  assert.match(store.status().controlPlane!.errors.join('\n'), /routing-table:10:5: pools\[0\]: unknown field "replics" \(did you mean "replicas"\?\)/);
  assert.equal(outcomes.length, 0, 'an invalid table never reaches a reload');

  // Valid alone, but the local pool rules send traffic to "general", which it drops.
  cp.body = table(['b'], 'renamed');
  await waitFor('rejected', () => store.status().controlPlane!.state === 'rejected', 1000);
  assert.match(store.status().controlPlane!.errors.join('\n'), /rules\.yaml:3:17: unknown pool "general"/);
  assert.equal(outcomes.at(-1)?.result, 'refused');
  assert.equal(replicaIds(store), 'a');
  assert.equal(store.status().controlPlane!.tableInUse !== store.status().controlPlane!.tableHash, true);

  cp.body = table(['c']);
  await waitFor('the fixed table', () => replicaIds(store) === 'c', 1000);
  assert.equal(store.status().controlPlane!.state, 'ok');
});

test('a router restarted during an outage serves the saved table; once the control plane answers 304 it is confirmed', async () => {
  const { cp, url } = await controlPlane(table(['a', 'b']));
  const dir = localPolicy();
  const cacheFile = join(tempDir(), 'state', 'table.json');
  const first = await open(dir, url, cacheFile);
  await first.close();

  cp.mode = 'drop';
  const during = await open(dir, url, cacheFile);
  assert.equal(replicaIds(during), 'a,b');
  assert.equal(during.status().controlPlane!.state, 'unreachable');
  assert.equal(during.status().controlPlane!.tableFrom, 'disk');
  await during.close();

  cp.mode = 'serve';
  const served = cp.notModified;
  const after = await open(dir, url, cacheFile);
  assert.equal(cp.notModified, served + 1, 'the saved ETag was sent and matched');
  assert.equal(after.status().controlPlane!.tableFrom, 'network');
  assert.equal(replicaIds(after), 'a,b');
});

test('no control plane and no saved table: the first load fails, naming the control plane', async () => {
  const dead = 'http://127.0.0.1:1/routing-table';
  await assert.rejects(
    PolicyStore.open({ dir: localPolicy(), builtins: BUILTIN_STRATEGIES, controlPlane: { url: dead, cacheFile: join(tempDir(), 'none.json') } }),
    (error: Error) => /routing-table:1:1: no routing table yet: .*unreachable/.test(error.message) && /unknown pool "general"/.test(error.message),
  );
});
