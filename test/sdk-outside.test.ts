// The SDK the way an outside plugin author meets it: `npm pack` of sdk/, the
// tarball installed into a fresh project under the OS temp folder (outside
// this repository), the project's files taken verbatim from docs/plugins.md
// (the code blocks marked `<!-- sdk-outside: FILE -->`), then
// (a) the TypeScript plugin and its test type-checked under strict + NodeNext
//     and the compiled test run, and
// (b) the plain-JavaScript plugin's conformance test run with plain
//     `node --test`: no tsx, no loader, nothing of this repository but the tarball.
// npm resolves the SDK's two dependencies (ajv, semver) from its cache first
// (--prefer-offline); TypeScript and Node's types are linked from this
// repository's node_modules rather than installed again.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, test } from 'node:test';

const ROOT = resolve(import.meta.dirname, '..');
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

/** The docs' code blocks marked `<!-- sdk-outside: FILE -->`, by file. */
export function outsideFiles(markdown: string): Map<string, string> {
  const files = new Map<string, string>();
  for (const match of markdown.matchAll(/<!-- sdk-outside: (\S+) -->\n```\w*\n([\s\S]*?)\n```/g)) files.set(match[1], `${match[2]}\n`);
  return files;
}

const docs = outsideFiles(readFileSync(join(ROOT, 'docs', 'plugins.md'), 'utf8'));
let project = '';
let packed = '';

// A child of this test runner must not think it is one of its test files (NODE_TEST_CONTEXT), nor load tsx.
const { NODE_TEST_CONTEXT: _runner, NODE_OPTIONS: _options, ...ENV } = process.env;

function run(command: string, args: string[], cwd: string): string {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', env: ENV });
  assert.equal(result.status, 0, `${command} ${args.join(' ')} (in ${cwd}) exited ${result.status}:\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

before(() => {
  project = mkdtempSync(join(tmpdir(), 'switchyard-sdk-outside-'));
  // Packs once: prepack builds sdk/dist (tsc), then the tarball lands in the scratch folder.
  const out = execFileSync(NPM, ['pack', '--json', '--pack-destination', project], {
    cwd: join(ROOT, 'sdk'),
    encoding: 'utf8',
    env: ENV,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [info] = JSON.parse(out.slice(out.search(/^\[/m))) as { filename: string }[];
  packed = info.filename;
  // An empty project gets the tarball as a user's `npm install <tarball>` would; then the docs' files replace it.
  writeFileSync(join(project, 'package.json'), '{ "name": "scratch", "private": true }\n');
  run(NPM, ['install', '--prefer-offline', '--no-audit', '--no-fund', '--save-dev', `./${packed}`], project);
  mkdirSync(join(project, 'node_modules', '@types'), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules', 'typescript'), join(project, 'node_modules', 'typescript'), 'dir');
  symlinkSync(join(ROOT, 'node_modules', '@types', 'node'), join(project, 'node_modules', '@types', 'node'), 'dir');
  for (const [file, text] of docs) {
    mkdirSync(dirname(join(project, file)), { recursive: true });
    writeFileSync(join(project, file), text);
  }
  // The plugin the TypeScript test imports: the repository's example, with its types from the package as the docs say.
  const example = readFileSync(join(ROOT, 'examples', 'plugins', 'least-kv.ts'), 'utf8');
  const fromPackage = example.replace("from '../../sdk/index.ts'", "from '@switchyard/sdk'");
  assert.notEqual(fromPackage, example, 'examples/plugins/least-kv.ts imports its types from ../../sdk/index.ts');
  writeFileSync(join(project, 'src', 'least-kv.ts'), fromPackage);
});

after(() => {
  if (project) rmSync(project, { recursive: true, force: true });
});

test('docs/plugins.md holds a whole outside project, and its package.json installs the tarball npm pack makes', () => {
  assert.deepEqual([...docs.keys()].sort(), ['package.json', 'plain/least-queue.js', 'plain/least-queue.test.js', 'src/least-kv.test.ts', 'tsconfig.json']);
  const manifest = JSON.parse(docs.get('package.json')!) as { devDependencies: Record<string, string> };
  assert.equal(manifest.devDependencies['@switchyard/sdk'], `file:${packed}`, 'the docs name the tarball of this SDK version');
  const installed = JSON.parse(readFileSync(join(project, 'node_modules', '@switchyard', 'sdk', 'package.json'), 'utf8')) as {
    exports: Record<string, unknown>;
  };
  assert.deepEqual(Object.keys(installed.exports).sort(), ['.', './package.json', './testkit']);
});

test('a TypeScript plugin and its test type-check against the package under strict + NodeNext, and the test passes', () => {
  run(process.execPath, [TSC, '-p', project], project);
  const out = run(process.execPath, ['--test', join('dist', 'least-kv.test.js')], project);
  assert.match(out, /# pass 2\b/);
  assert.match(out, /# fail 0\b/);
});

test("a plain-JavaScript plugin's conformance test runs with plain node --test", () => {
  const out = run(process.execPath, ['--test', join('plain', 'least-queue.test.js')], project);
  assert.match(out, /# pass 2\b/);
  assert.match(out, /# fail 0\b/);
});
