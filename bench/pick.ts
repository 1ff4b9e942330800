// npm run bench:pick — what the plugin cage costs: one pick of a caged
// (third-party) strategy against the same strategy inline, over 16 and 128
// candidates, p50/p99 in µs, with the hooks the router sends (onRouted each
// pick). Two plugins: a trivial one (first candidate: the cage's own cost)
// and the example least-kv (real work). Caged two ways, interleaved row by
// row: "thread" (the plugin's worker thread in the router's process) and
// "process" (the default: the worker in a process of its own, each call
// relayed over a pipe). Then the memory each caged plugin costs: the router's
// RSS growth per cage and, for "process", the plugin process's own RSS.
//   node --import tsx bench/pick.ts [picks]
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CageSkip } from '../core/plugins/cage/skip.ts';
import { PluginLoader } from '../core/plugins/loader.ts';
import { context, fleet, request } from '../sdk/testkit/index.ts';
import type { StrategyDefinition } from '../sdk/index.ts';
import { BUILTIN_STRATEGIES } from '../plugins/index.ts';

const PICKS = Number(process.argv[2] ?? 10_000);
const work = mkdtempSync(join(tmpdir(), 'switchyard-bench-pick-'));
copyFileSync(new URL('../examples/plugins/least-kv.ts', import.meta.url).pathname, join(work, 'least-kv.ts'));
writeFileSync(
  join(work, 'first.mjs'),
  "export default { name: 'first', version: '1.0.0', sdk: '^1', create() { return { pick: (_r, c) => ({ replica: c[0].id, reason: 'first' }), onRouted() {} }; } };\n",
);

function measure(definition: StrategyDefinition, size: number, gapMicros: number): { p50: number; p99: number; skipped: number } {
  const ctx = context();
  const instance = definition.create({ per_request_kv: 0.01, max_kv: 1 }, ctx);
  const candidates = fleet(size, (i) => ({ kvUsage: ((i * 37) % 100) / 100, inFlight: i % 5 }));
  const requests = Array.from({ length: 64 }, (_, i) => request({ id: `bench-${i}`, conversationId: `c${i % 8}` }));
  const times: number[] = [];
  let skipped = 0;
  for (let n = 0; times.length < PICKS; n++) {
    const req = requests[n % requests.length];
    const started = performance.now();
    let result;
    try {
      result = instance.pick(req, candidates);
    } catch (error) {
      // No answer in time (a descheduled worker on a busy machine): counted, not timed; the worker
      // is given 20 ms to catch up, so that the calls after it are not all "busy" skips.
      if (!(error instanceof CageSkip)) throw error;
      skipped++;
      const until = performance.now() + 20;
      while (performance.now() < until);
      continue;
    }
    const elapsed = performance.now() - started;
    instance.onRouted?.(req, result && 'replica' in result ? result.replica : candidates[0].id);
    if (n >= 2000) times.push(elapsed * 1000);
    ctx.advance(1);
    // Requests rarely come back to back: a gap lets the worker park, as it would between requests.
    if (gapMicros > 0) {
      const until = performance.now() + gapMicros / 1000;
      while (performance.now() < until);
    }
  }
  instance.dispose?.();
  times.sort((a, b) => a - b);
  return { p50: times[Math.floor(times.length * 0.5)], p99: times[Math.floor(times.length * 0.99)], skipped };
}

const inline = new PluginLoader({ builtins: BUILTIN_STRATEGIES, cacheDir: join(work, 'inline'), isolate: false });
const threads = new PluginLoader({ builtins: BUILTIN_STRATEGIES, cacheDir: join(work, 'thread'), cage: { isolation: 'thread' } });
const processes = new PluginLoader({ builtins: BUILTIN_STRATEGIES, cacheDir: join(work, 'process'), cage: { isolation: 'process' } });
const rows: string[][] = [];
for (const file of ['first.mjs', 'least-kv.ts']) {
  const path = join(work, file);
  const variants = [
    ['inline', (await inline.loadFile(path)).plugin!.definition],
    ['caged, thread', (await threads.loadFile(path)).plugin!.definition],
    ['caged, process', (await processes.loadFile(path)).plugin!.definition],
  ] as const;
  for (const size of [16, 128]) {
    for (const gap of [0, 200]) {
      const base = measure(variants[0][1], size, gap);
      for (const [label, definition] of variants) {
        const m = label === 'inline' ? base : measure(definition, size, gap);
        rows.push([
          file.replace(/\..*/, ''),
          String(size),
          gap ? `${gap} µs` : 'none',
          label,
          m.p50.toFixed(1),
          m.p99.toFixed(1),
          (m.p50 / base.p50).toFixed(1),
          String(m.skipped),
        ]);
      }
    }
  }
}
await Promise.all([inline.close(), threads.close(), processes.close()]);

/** Resident memory of process `pid` (this one by default), MB, as the kernel counts it. */
function rssMb(pid: number | 'self' = 'self'): number {
  const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
  return kb / 1024;
}

// Memory per caged plugin: CAGES of the trivial plugin, each its own file, one mode at a time.
const CAGES = 4;
const memory: string[] = [];
for (const isolation of ['thread', 'process'] as const) {
  const loader = new PluginLoader({ builtins: BUILTIN_STRATEGIES, cacheDir: join(work, `memory-${isolation}`), cage: { isolation } });
  const before = rssMb();
  const pids: number[] = [];
  for (let i = 0; i < CAGES; i++) {
    const path = join(work, `memory-${isolation}-${i}.mjs`);
    writeFileSync(path, readFileSync(join(work, 'first.mjs'), 'utf8').replace("name: 'first'", `name: 'first${i}'`));
    const plugin = (await loader.loadFile(path)).plugin!;
    const instance = plugin.definition.create({}, context());
    for (let n = 0; n < 1000; n++) {
      try {
        instance.pick(request(), fleet(16));
      } catch (error) {
        if (!(error instanceof CageSkip)) throw error;
      }
    }
    const pid = plugin.cage?.status().pid;
    if (pid !== undefined) pids.push(pid);
  }
  const router = (rssMb() - before) / CAGES;
  const own = pids.length ? pids.map((pid) => rssMb(pid)).reduce((a, b) => a + b, 0) / pids.length : 0;
  memory.push(`${isolation}: router +${router.toFixed(1)} MB per cage${pids.length ? `, plugin process ${own.toFixed(1)} MB RSS each` : ''}`);
  await loader.close();
}
rmSync(work, { recursive: true, force: true });

const header = ['plugin', 'candidates', 'gap', 'how', 'p50 µs', 'p99 µs', 'p50 vs inline', 'skipped'];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i])).join('  ');
console.log(`pick cost, ${PICKS} answered picks each after 2,000 warm-up (node ${process.version}); skipped: calls that timed out (20 ms), not timed`);
console.log(line(header));
for (const row of rows) console.log(line(row));
console.log(`memory per caged plugin (${CAGES} cages of the trivial plugin, after 1,000 picks each):`);
for (const m of memory) console.log(`  ${m}`);
