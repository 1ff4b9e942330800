// Line coverage of core/, per folder, for scripts/run-tests.mjs. The test run
// writes V8's own coverage (NODE_V8_COVERAGE, inherited by every process a test
// starts: routers spawned from dist/ included, mapped back to core/*.ts through
// dist/'s source maps); c8 turns that into per-file counts, and this file adds
// them up by folder. Files no test loads count too (`--all`), at 0 %.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

const c8 = new URL('../node_modules/c8/bin/c8.js', import.meta.url).pathname;

/** An empty folder for the run's raw V8 coverage. */
export function freshCoverageDir(root) {
  const dir = join(root, '.test-results', `v8-coverage-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** Prints lines % per core/ folder and in all; removes the raw data. Never fails the run. */
export function printCoverage(root, rawDir) {
  const reportDir = `${rawDir}-report`;
  try {
    const report = spawnSync(
      process.execPath,
      [
        c8,
        'report',
        '--temp-directory',
        rawDir,
        '--report-dir',
        reportDir,
        '--reporter',
        'json-summary',
        '--all',
        '--src',
        join(root, 'core'),
        // dist/core/*.js is counted as the core/*.ts its source map names.
        '--include',
        'core/**/*.ts',
        '--include',
        'dist/core/**/*.js',
        '--exclude',
        '**/*.d.ts',
        '--merge-async',
      ],
      { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] },
    );
    const summaryFile = join(reportDir, 'coverage-summary.json');
    if (report.status !== 0 || !existsSync(summaryFile)) {
      console.error('coverage: c8 could not build the report (the tests ran; only the figure is missing)');
      return;
    }
    const perFile = JSON.parse(readFileSync(summaryFile, 'utf8'));
    const folders = new Map();
    for (const [file, { lines }] of Object.entries(perFile)) {
      if (file === 'total') continue;
      const parts = relative(root, file).split(sep);
      const folder = parts.length > 2 ? `${parts[0]}/${parts[1]}` : `${parts[0]}/*.ts`;
      const sum = folders.get(folder) ?? { covered: 0, total: 0 };
      sum.covered += lines.covered;
      sum.total += lines.total;
      folders.set(folder, sum);
    }
    const pct = ({ covered, total }) => (total === 0 ? '-' : `${((100 * covered) / total).toFixed(1)} %`);
    console.log('\nline coverage of core/ (every process the tests started):');
    for (const [folder, sum] of [...folders].sort(([a], [b]) => a.localeCompare(b))) {
      console.log(`  ${folder.padEnd(20)} ${pct(sum).padStart(8)}  (${sum.covered} of ${sum.total} lines)`);
    }
    const total = perFile.total.lines;
    console.log(`  ${'core/ in all'.padEnd(20)} ${pct(total).padStart(8)}  (${total.covered} of ${total.total} lines)`);
  } finally {
    rmSync(rawDir, { recursive: true, force: true });
    rmSync(reportDir, { recursive: true, force: true });
  }
}
