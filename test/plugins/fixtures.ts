// Temporary policy and plugin directories for the loader and reload tests.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A fresh temp directory; `cleanup()` removes every one made. */
const made: string[] = [];
export function tempDir(prefix = 'switchyard-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}
export function cleanup(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
}

export function write(path: string, text: string): string {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, text);
  return path;
}

/** A plugin's source: `extra` goes inside the definition object. */
export function pluginSource(name: string, options: { version?: string; sdk?: string; extra?: string; typed?: boolean } = {}): string {
  const ts = options.typed ?? false;
  return `${ts ? "import type { StrategyDefinition } from '@switchyard/sdk';\n" : ''}
export default {
  name: '${name}',
  version: '${options.version ?? '1.0.0'}',
  sdk: '${options.sdk ?? '^1'}',
  configSchema: { type: 'object', additionalProperties: false, properties: { label: { type: 'string', default: '${name}' } } },
  ${options.extra ?? ''}
  create(config${ts ? ': { label: string }' : ''}) {
    return {
      pick(_request${ts ? ': unknown' : ''}, candidates${ts ? ': readonly { id: string }[]' : ''}) {
        return candidates.length ? { replica: candidates[0].id, reason: config.label } : null;
      },
    };
  },
}${ts ? ' satisfies StrategyDefinition<{ label: string }>' : ''};
`;
}

export interface PolicyInit {
  /** The pool's strategy chain, as YAML flow (default [power-of-two]). */
  readonly strategies?: string;
  readonly pluginDirs?: readonly string[];
  /** Replica ids of the one pool. */
  readonly replicas?: readonly string[];
  /** Leave the models and pools out (they come from a control plane). */
  readonly withoutTable?: boolean;
}

/** A small, valid policy: one model, one pool, settings naming plugin dirs. */
export function writePolicy(dir: string, init: PolicyInit = {}): void {
  write(join(dir, 'settings.yaml'), `kind: settings\nplugin_dirs: [${(init.pluginDirs ?? []).map((d) => JSON.stringify(d)).join(', ')}]\n`);
  if (init.withoutTable) return;
  write(join(dir, 'models.yaml'), modelsYaml());
  write(join(dir, 'pools.yaml'), poolsYaml(init.strategies, init.replicas));
}

export function modelsYaml(): string {
  return 'kind: models\nmodels:\n  - id: test-model\n    versions:\n      - version: v1\n';
}

export function poolsYaml(strategies = '[power-of-two]', replicas: readonly string[] = ['a', 'b']): string {
  return [
    'kind: pools',
    'pools:',
    '  - name: general',
    '    model: test-model',
    '    version: v1',
    `    strategies: ${strategies}`,
    '    replicas:',
    ...replicas.map((id, i) => `      - { id: ${id}, url: "http://127.0.0.1:${9000 + i}" }`),
    '',
  ].join('\n');
}
