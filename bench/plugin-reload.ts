// npm run bench:plugin-reload — what a plugin reload costs: memory kept per
// reload of a changed plugin (Node can't unload ES modules), for the example
// plugin and for a 200 KB one, importing compiled files (what the loader
// does) and, for comparison, data: URLs; the cost of a reload that finds
// nothing changed; and whole-store reload latency. Modules are imported
// inline here (isolate: false): a caged plugin's worker is stopped instead.
// Run with --expose-gc so heap figures are after a full collection:
//   node --expose-gc --import tsx bench/plugin-reload.ts [reloads]
import { cpSync, readFileSync, writeFileSync, mkdtempSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { PluginLoader } from '../core/plugins/loader.ts';
import { PolicyStore } from '../core/decide/store.ts';
import { BUILTIN_STRATEGIES } from '../plugins/index.ts';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  console.error('run with --expose-gc: node --expose-gc --import tsx bench/plugin-reload.ts');
  process.exit(2);
}
const RELOADS = Number(process.argv[2] ?? 200);
const work = mkdtempSync(join(tmpdir(), 'switchyard-bench-'));
const example = readFileSync(new URL('../examples/plugins/least-kv.ts', import.meta.url), 'utf8').replace(
  "from '../../sdk/index.ts'",
  "from '@switchyard/sdk'",
);
// A large plugin: a 200 KB lookup table in the module (docs/plugins.md, "Memory per reload").
const large = `${example}\nexport const TABLE = ${JSON.stringify(Array.from({ length: 20_000 }, (_, i) => `k${i}`))};\n`;

function memory(): { heap: number; rss: number } {
  for (let i = 0; i < 3; i++) gc!();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, rss: m.rss };
}
const kb = (bytes: number) => `${(bytes / 1024).toFixed(1)} KB`;
const rows: string[][] = [];

async function changedPluginReloads(label: string, source: string): Promise<void> {
  const dir = join(work, label.replace(/\W+/g, '-'));
  mkdirSync(dir, { recursive: true });
  const loader = new PluginLoader({ builtins: BUILTIN_STRATEGIES, cacheDir: join(dir, '.cache'), isolate: false });
  const path = join(dir, 'least-kv.ts');
  writeFileSync(path, source);
  await loader.loadFile(path);
  const before = memory();
  const started = performance.now();
  for (let i = 0; i < RELOADS; i++) {
    writeFileSync(path, `${source}\nexport const EDIT = ${i};\n`);
    const { plugin, problems } = await loader.loadFile(path);
    if (!plugin) throw new Error(problems.map((p) => p.message).join('\n'));
  }
  const ms = (performance.now() - started) / RELOADS;
  const after = memory();
  rows.push([
    `${label}, changed each time (file import)`,
    kb(Buffer.byteLength(source)),
    `${ms.toFixed(1)} ms`,
    kb((after.heap - before.heap) / RELOADS),
    kb((after.rss - before.rss) / RELOADS),
  ]);
  const unchangedStarted = performance.now();
  for (let i = 0; i < RELOADS; i++) await loader.loadFile(path);
  const unchangedMs = (performance.now() - unchangedStarted) / RELOADS;
  const settled = memory();
  rows.push([
    `${label}, unchanged (hash check only)`,
    kb(Buffer.byteLength(source)),
    `${unchangedMs.toFixed(3)} ms`,
    kb((settled.heap - after.heap) / RELOADS),
    kb((settled.rss - after.rss) / RELOADS),
  ]);
}

async function dataUrlReloads(label: string, source: string): Promise<void> {
  const sdk = new URL('../sdk/index.ts', import.meta.url).pathname;
  const compile = async (text: string) =>
    (
      await build({
        stdin: { contents: text, loader: 'ts', resolveDir: work, sourcefile: 'least-kv.ts' },
        bundle: true,
        write: false,
        format: 'esm',
        platform: 'node',
        logLevel: 'silent',
        plugins: [{ name: 'sdk', setup: (b) => b.onResolve({ filter: /^@switchyard\/sdk$/ }, () => ({ path: sdk })) }],
      })
    ).outputFiles[0].text;
  await import(`data:text/javascript,${encodeURIComponent(await compile(source))}`);
  const before = memory();
  const started = performance.now();
  for (let i = 0; i < RELOADS; i++) await import(`data:text/javascript,${encodeURIComponent(await compile(`${source}\nexport const EDIT = ${i};\n`))}`);
  const ms = (performance.now() - started) / RELOADS;
  const after = memory();
  rows.push([
    `${label}, changed each time (data: URL)`,
    kb(Buffer.byteLength(source)),
    `${ms.toFixed(1)} ms`,
    kb((after.heap - before.heap) / RELOADS),
    kb((after.rss - before.rss) / RELOADS),
  ]);
}

async function storeReloads(): Promise<void> {
  const dir = join(work, 'store');
  cpSync(new URL('../policies/', import.meta.url), dir, { recursive: true });
  mkdirSync(join(dir, 'plugins'));
  writeFileSync(join(dir, 'plugins', 'least-kv.ts'), example);
  writeFileSync(join(dir, 'settings.yaml'), `${readFileSync(join(dir, 'settings.yaml'), 'utf8')}plugin_dirs: [plugins]\n`);
  const pools = readFileSync(join(dir, 'pools.yaml'), 'utf8');
  const store = await PolicyStore.open({ dir, loader: new PluginLoader({ builtins: BUILTIN_STRATEGIES, cacheDir: join(work, 'store-cache') }) });
  const timings = { policy: [] as number[], plugin: [] as number[], unchanged: [] as number[] };
  const before = memory();
  for (let i = 0; i < RELOADS; i++) {
    const pluginTurn = i % 2 === 1;
    if (pluginTurn) writeFileSync(join(dir, 'plugins', 'least-kv.ts'), `${example}\nexport const EDIT = ${i};\n`);
    else
      writeFileSync(
        join(dir, 'pools.yaml'),
        pools.replace('strategies: [least-load]', i % 4 === 0 ? 'strategies: [least-kv]' : 'strategies: [least-load, least-kv]'),
      );
    const outcome = await store.reload('bench');
    if (outcome.result !== 'live') throw new Error(`${i}: ${outcome.result} ${outcome.errors.join('\n')}`);
    (pluginTurn ? timings.plugin : timings.policy).push(outcome.durationMs);
    timings.unchanged.push((await store.reload('bench, nothing changed')).durationMs);
  }
  const after = memory();
  await store.close();
  const pct = (list: number[], p: number) => [...list].sort((a, b) => a - b)[Math.min(list.length - 1, Math.ceil((p / 100) * list.length) - 1)];
  console.log(`\nPolicyStore.reload() on the example policy (5 files, 11 pools) plus one plugin, ${RELOADS} swaps:`);
  for (const [name, list] of Object.entries(timings))
    console.log(`  ${name.padEnd(10)} p50 ${pct(list, 50).toFixed(1)} ms   p99 ${pct(list, 99).toFixed(1)} ms`);
  console.log(
    `  memory kept per swap (half of them new plugin modules): heap ${kb((after.heap - before.heap) / RELOADS)}, RSS ${kb((after.rss - before.rss) / RELOADS)}`,
  );
}

console.log(`node ${process.version}, ${RELOADS} reloads each\n`);
await changedPluginReloads('least-kv example', example);
await changedPluginReloads('200 KB plugin', large);
await dataUrlReloads('least-kv example', example);
await dataUrlReloads('200 KB plugin', large);
const header = ['case', 'source', 'per reload', 'heap kept / reload', 'RSS kept / reload'];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
for (const row of [header, ...rows]) console.log(row.map((cell, i) => cell.padEnd(widths[i])).join('  '));
await storeReloads();
rmSync(work, { recursive: true, force: true });
