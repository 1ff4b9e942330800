// A policy folder for a router child whose pool chains plugin strategies:
// the tiny model, open tenants, `plugin_dirs: [plugins]` and two emulated
// replicas, the plugins' files written under plugins/.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OPEN_TENANTS, TINY_MODELS, tinyPool } from '../helpers/router.ts';

/** `plugins`: file name (without .mjs) → its code; `strategies`: the pool's chain, e.g. '[snoop, round-robin]'. */
export function pluginPolicyDir(prefix: string, plugins: Record<string, string>, options: { strategies: string; decisionHeaders?: 'full' }): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  mkdirSync(join(dir, 'plugins'));
  for (const [name, code] of Object.entries(plugins)) writeFileSync(join(dir, 'plugins', `${name}.mjs`), code);
  writeFileSync(join(dir, 'models.yaml'), TINY_MODELS);
  writeFileSync(join(dir, 'tenants.yaml'), OPEN_TENANTS);
  writeFileSync(
    join(dir, 'settings.yaml'),
    `kind: settings\nplugin_dirs: [plugins]\n${options.decisionHeaders ? `decision_headers: ${options.decisionHeaders}\n` : ''}`,
  );
  writeFileSync(join(dir, 'pools.yaml'), tinyPool({ replicas: 2, strategies: options.strategies }));
  return dir;
}
