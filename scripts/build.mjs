#!/usr/bin/env node
// Compiles what production runs (cli, core, sdk, plugins, sim) to plain
// JavaScript in dist/, file for file, with source maps, and copies the data
// files read at run time (JSON schemas, the decision explorer's page).
// esbuild only strips types (about a second); `npm test` type-checks with tsc. Run by `npm ci` (prepare),
// `npm run build`, and by scripts/run-tests.mjs before every test run, so the
// `switchyard` command the tests spawn is never older than the sources.
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const OUT = join(ROOT, 'dist');
const DIRS = ['cli', 'core', 'sdk', 'plugins', 'sim'];
/** Not compiled: tests, declaration files, and the SDK package's own build output. */
const SKIP = /(\.test\.ts|\.d\.ts)$/;

function walk(dir) {
  const found = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (name === 'node_modules' || name === 'dist' || name.startsWith('.')) continue;
    if (statSync(path).isDirectory()) found.push(...walk(path));
    else found.push(path);
  }
  return found;
}

/** Every import stays an import of its own file: relative .ts specifiers become .js, packages stay packages. */
const keepImports = {
  name: 'keep-imports',
  setup(b) {
    b.onResolve({ filter: /.*/ }, (args) => {
      if (args.kind === 'entry-point') return undefined;
      const path = /^\.\.?\//.test(args.path) ? args.path.replace(/\.(m?)ts$/, '.$1js') : args.path;
      return { path, external: true };
    });
  },
};

export async function buildDist({ quiet = false } = {}) {
  const started = performance.now();
  const files = DIRS.flatMap((d) => walk(join(ROOT, d)));
  const sources = files.filter((f) => /\.(m?ts)$/.test(f) && !SKIP.test(f));
  // Everything else a module may read at run time (JSON schemas, the explorer's page), not docs, scripts or settings.
  const data = files.filter((f) => !/\.(m?ts|m?js|md)$/.test(f) && !/(^|\/)(package|tsconfig)\.json$/.test(f));
  rmSync(OUT, { recursive: true, force: true });
  await build({
    entryPoints: sources,
    outdir: OUT,
    outbase: ROOT,
    bundle: true,
    plugins: [keepImports],
    format: 'esm',
    platform: 'node',
    target: 'node20',
    sourcemap: true,
    logLevel: 'warning',
  });
  // What dist/ modules read of the package (`switchyard --version` reads ../package.json), and ES modules for Node.
  const { name, version, type } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  writeFileSync(join(OUT, 'package.json'), `${JSON.stringify({ name, version, type, private: true }, null, 2)}\n`);
  for (const file of data) {
    const to = join(OUT, relative(ROOT, file));
    mkdirSync(dirname(to), { recursive: true });
    copyFileSync(file, to);
  }
  if (!quiet) console.log(`build: ${sources.length} files and ${data.length} data files to dist/ in ${Math.round(performance.now() - started)} ms`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await buildDist();
