// core/plugins and core/policy share their diagnostics through
// core/diagnostics; plugins must never import policy (policy may import
// plugins). A cycle here once made neither loadable on its own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const CORE = new URL('../../core/', import.meta.url).pathname;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : /\.m?ts$/.test(e.name) ? [join(dir, e.name)] : [],
  );
}

test('core/plugins and core/diagnostics import nothing from core/policy', () => {
  const crossings: string[] = [];
  for (const area of ['plugins', 'diagnostics']) {
    for (const file of sources(join(CORE, area))) {
      for (const match of readFileSync(file, 'utf8').matchAll(/(?:import|export)[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)) {
        const spec = match[1] ?? match[2];
        if (/(^|\/)policy\//.test(spec)) crossings.push(`${file.slice(CORE.length)} → ${spec}`);
      }
    }
  }
  assert.deepEqual(crossings, []);
  assert.ok(sources(join(CORE, 'plugins')).length > 0 && sources(join(CORE, 'diagnostics')).length > 0);
});
