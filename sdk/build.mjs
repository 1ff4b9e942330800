#!/usr/bin/env node
// Builds the SDK package into dist/: JavaScript and type declarations (tsc,
// sdk/tsconfig.json), then rewrites the declarations' relative `.ts`
// specifiers to `.js` (tsc rewrites them in the JavaScript only), so every
// TypeScript version and setting reads them. Run by `npm pack` (prepack).
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
const dist = join(here, 'dist');
rmSync(dist, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const run = spawnSync(process.execPath, [tsc, '-p', join(here, 'tsconfig.json')], { stdio: 'inherit' });
if (run.status !== 0) process.exit(run.status ?? 1);

const declarations = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? declarations(path) : name.endsWith('.d.ts') ? [path] : [];
  });
for (const file of declarations(dist)) {
  const text = readFileSync(file, 'utf8');
  const fixed = text.replace(/(from\s+|import\s*\(\s*)(['"])(\.\.?\/[^'"]+)\.ts\2/g, '$1$2$3.js$2');
  if (fixed !== text) writeFileSync(file, fixed);
}
