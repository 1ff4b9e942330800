// The habits CI holds the code to: the lint rules biome.json sets (faults
// caught, style left alone) and `npm test -- PATH` refusing to pass on a
// path that matches nothing (docs/contributing.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const root = new URL('../../', import.meta.url).pathname;
const biome = join(root, 'node_modules/@biomejs/biome/bin/biome');

/** The rules Biome reports for one file, linted with the repository's biome.json. */
function rulesFiredOn(source: string): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-lint-'));
  try {
    writeFileSync(join(dir, 'probe.ts'), source);
    const run = spawnSync(
      process.execPath,
      [biome, 'lint', `--config-path=${join(root, 'biome.json')}`, '--vcs-enabled=false', '--reporter=github', 'probe.ts'],
      {
        cwd: dir,
        encoding: 'utf8',
        timeout: 60_000,
      },
    );
    assert.equal(run.error, undefined, 'Biome runs');
    return [...run.stdout.matchAll(/title=lint\/([a-zA-Z]+\/[a-zA-Z]+),/g)].map((m) => m[1]).sort();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('lint catches unused imports and variables, any, a let never reassigned, and a type imported as a value', () => {
  const fired = rulesFiredOn(
    [
      "import { join } from 'node:path';",
      "import { Agent } from 'node:http';",
      'export function f(): void {',
      '  const unused = 1;',
      '}',
      'export let never: any = 1;',
      'export const agent: Agent | undefined = undefined;',
      '',
    ].join('\n'),
  );
  assert.deepEqual(fired, [
    'correctness/noUnusedImports',
    'correctness/noUnusedVariables',
    'style/useConst',
    'style/useImportType',
    'suspicious/noExplicitAny',
  ]);
});

test("lint leaves this code base's deliberate idioms alone: non-null assertions, assignments in expressions, template literals as data", () => {
  const fired = rulesFiredOn(
    [
      'const groups = new Map<string, number[]>();',
      'let list: number[] | undefined;',
      "(list ??= []).push(groups.get('a')!.length);",
      "export const sent = ['${jndi:ldap://x}', list];",
      '',
    ].join('\n'),
  );
  assert.deepEqual(fired, []);
});

test('npm test -- PATH that matches no test file fails and says so, before building anything', () => {
  const run = spawnSync(process.execPath, [join(root, 'scripts/run-tests.mjs'), 'no-such-test-file-anywhere'], {
    cwd: root,
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(run.status, 1);
  assert.match(run.stderr, /run-tests: no test files matched/);
});
