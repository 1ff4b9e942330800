// docs/plugins.md end to end: the example plugin dropped into the watched
// plugin directory of a running router, then named in the policy, takes
// effect without a restart.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PolicyStore } from '../../core/decide/store.ts';
import { OPEN_TENANTS, startTestRouter, TINY_MODELS, tinyPool, until } from '../helpers/router.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';

const EXAMPLE = new URL('../../examples/plugins/least-kv.ts', import.meta.url).pathname;

test('the example least-kv plugin is picked up by a running router', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-example-'));
  mkdirSync(join(dir, 'plugins'));
  writeFileSync(join(dir, 'models.yaml'), TINY_MODELS);
  writeFileSync(join(dir, 'tenants.yaml'), OPEN_TENANTS);
  writeFileSync(join(dir, 'settings.yaml'), 'kind: settings\nplugin_dirs: [plugins]\ndecision_headers: full\n');
  writeFileSync(join(dir, 'pools.yaml'), tinyPool({ replicas: 2, strategies: '[power-of-two]' }));
  const store = await PolicyStore.open({ dir, builtins: BUILTIN_STRATEGIES, seed: 1, debounceMs: 50 });
  await store.watch();
  const t = await startTestRouter({}, { policy: store });
  const reason = async () => {
    const { response } = await t.client.completions.create({ model: 'tiny', prompt: 'hi', max_tokens: 1 }).withResponse();
    return response.headers.get('x-switchyard-reason') ?? '';
  };
  try {
    assert.match(await reason(), /^power-of-two: /);
    copyFileSync(EXAMPLE, join(dir, 'plugins', 'least-kv.ts'));
    writeFileSync(join(dir, 'pools.yaml.tmp'), tinyPool({ replicas: 2, strategies: '[{ name: least-kv, config: { max_kv: 0.95 } }, power-of-two]' }));
    renameSync(join(dir, 'pools.yaml.tmp'), join(dir, 'pools.yaml'));
    await until(async () => /^least-kv: /.test(await reason()), 5000, 'the plugin to take effect');
    assert.ok(store.status().plugins.some((p) => p.name === 'least-kv'));
  } finally {
    await t.close();
    await store.close();
  }
});
