// The watchdog, in real child processes: one blocks its event loop and must
// die with a non-zero status and a log line; one stays responsive and must not.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const WATCHDOG = new URL('../../core/observe/watchdog.ts', import.meta.url).pathname;

function runChild(body: string): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string; ms: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'sy-watchdog-'));
  const file = join(dir, 'child.ts');
  writeFileSync(file, `import { startWatchdog } from ${JSON.stringify(WATCHDOG)};\n${body}\n`);
  const started = Date.now();
  const child = spawn(process.execPath, ['--import', 'tsx', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d));
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) =>
    child.once('exit', (code, signal) => {
      clearTimeout(killer);
      resolve({ code, signal, stderr, ms: Date.now() - started });
    }),
  );
}

test('a blocked event loop: the process logs and dies with a non-zero status', async () => {
  const result = await runChild(`
startWatchdog({ thresholdMs: 500, name: 'blocked-child' });
setTimeout(() => { const end = Date.now() + 30_000; while (Date.now() < end) {} process.exit(0); }, 200);
`);
  assert.notEqual(result.code, 0, `exit code ${result.code}`);
  assert.ok(result.signal === 'SIGABRT' || result.signal === 'SIGKILL' || (result.code ?? 0) > 128, `killed by the watchdog: ${result.code} ${result.signal}`);
  const line = result.stderr.split('\n').find((l) => l.includes('watchdog'));
  assert.ok(line, `a log line on stderr: ${result.stderr.slice(0, 500)}`);
  const entry = JSON.parse(line!);
  assert.equal(entry.name, 'blocked-child');
  assert.ok(entry.blockedMs >= 500, `blocked ${entry.blockedMs} ms`);
  assert.ok(result.ms < 25_000, `died well before the loop would end (${result.ms} ms)`);
});

test('a busy but responsive process is left alone', async () => {
  const result = await runChild(`
const dog = startWatchdog({ thresholdMs: 500 });
// Short synchronous bursts (under the threshold) for ~2 s, then a clean exit.
let n = 0;
const work = setInterval(() => {
  const end = Date.now() + 100; while (Date.now() < end) {}
  if (++n === 15) { clearInterval(work); void dog.stop().then(() => process.exit(0)); }
}, 20);
`);
  assert.equal(result.code, 0, `exit ${result.code} ${result.signal}: ${result.stderr.slice(0, 500)}`);
  assert.ok(!result.stderr.includes('watchdog'));
});
