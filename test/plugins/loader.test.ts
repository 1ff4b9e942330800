// Loading third-party strategies from plugin directories: what loads, what
// is refused (and how the refusal names the file), and what is reused.
import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { listPluginFiles, PluginLoader } from '../../core/plugins/loader.ts';
import { loadSnapshot } from '../../core/decide/load.ts';
import { context, expectPick, fleet, request } from '../../sdk/testkit/index.ts';
import { cleanup, pluginSource, tempDir, write, writePolicy } from './fixtures.ts';
import { formatProblem } from '../../core/diagnostics/problem.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';
import { SDK_VERSION } from '../../sdk/types.ts';

after(cleanup);

// These tests are about loading, not the pick budget (test/plugins/cage.test.ts has that): a
// second for a call, so a cold cage on a loaded machine (a 20 ms pick took 32 ms at load 18) is no failure.
const loader = () => new PluginLoader({ builtins: BUILTIN_STRATEGIES, cacheDir: tempDir('switchyard-plugin-cache-'), cage: { callTimeoutMs: 1_000 } });
const errorsOf = (problems: readonly { file: string; line: number; col: number; message: string }[]) => problems.map(formatProblem);

test('a .ts plugin with types and an @switchyard/sdk import, a .mjs and a plain .js plugin load from one directory', async () => {
  const dir = tempDir();
  write(
    join(dir, 'typed.ts'),
    `import { loadScore, type StrategyDefinition } from '@switchyard/sdk';
interface Config { label: string }
export default {
  name: 'typed', version: '2.1.0', sdk: '^1',
  create(_config: Config, ctx) {
    return { pick: (_request, candidates) => candidates.length ? { replica: candidates[0].id, reason: 'score ' + loadScore(candidates[0], ctx.loadScoreWeights) } : null };
  },
} satisfies StrategyDefinition<Config>;
`,
  );
  write(join(dir, 'module.mjs'), pluginSource('module'));
  write(join(dir, 'plain.js'), pluginSource('plain'));
  write(join(dir, 'notes.md'), '# not a plugin');
  write(join(dir, 'typed.test.ts'), 'throw new Error("a test file is not a plugin")');
  write(join(dir, 'types.d.ts'), 'export {};');

  const set = await loader().loadDirs([dir]);
  assert.deepEqual(errorsOf(set.problems), []);
  assert.deepEqual(set.plugins.map((p) => p.name).sort(), ['module', 'plain', 'typed']);
  assert.ok(set.registry.get('power-of-two'), 'built-ins stay registered');
  assert.equal(set.registry.originOf?.('typed'), set.plugins.find((p) => p.name === 'typed')!.file);
  assert.equal(set.registry.originOf?.('power-of-two'), undefined);
  const typed = set.registry.get('typed')!;
  const pick = expectPick(typed.create({}, context()).pick(request(), fleet(2, { kvUsage: 0.5 })));
  assert.equal(pick.replica, 'r0');
  assert.equal(pick.reason, 'score 0.3');
});

test('a syntax error is refused with FILE:LINE:COL', async () => {
  const dir = tempDir();
  const path = write(join(dir, 'broken.ts'), "export default {\n  name: 'broken',\n  create( {\n};\n");
  const { plugin, problems } = await loader().loadFile(path);
  assert.equal(plugin, undefined);
  assert.equal(problems.length, 1);
  assert.match(formatProblem(problems[0]), /broken\.ts:4:2: does not compile: Expected "\)" but found ";"/);
});

test('a wrong export is refused, naming the file and what is wrong', async () => {
  const dir = tempDir();
  const cases = {
    'none.mjs': ['export const strategy = {};', /none\.mjs:1:1: no default export \(it exports strategy\)/],
    'factory.mjs': ['\nexport default function make() {}', /factory\.mjs:2:1: .*default export is function, not a strategy definition/],
    'partial.mjs': [
      "export default { name: 'partial', version: '1.0.0', sdk: '^1' };",
      /partial\.mjs:1:1: not a strategy definition: "create" must be a function/,
    ],
    'badrange.mjs': ["export default { name: 'badrange', version: '1', sdk: 'one', create() {} };", /"sdk" must be a semver range/],
  } as const;
  const l = loader();
  for (const [name, [source, expected]] of Object.entries(cases)) {
    const { problems } = await l.loadFile(write(join(dir, name), source));
    assert.match(errorsOf(problems).join('\n'), expected, name);
  }
});

test('an incompatible sdk range is refused, naming the plugin, its range and this SDK', async () => {
  const dir = tempDir();
  const { problems } = await loader().loadFile(write(join(dir, 'future.ts'), pluginSource('future', { sdk: '^2' })));
  const message = errorsOf(problems).join('\n');
  assert.match(message, /future\.ts:\d+:1: refused: strategy "future" supports SDK \^2, but this router provides SDK \d/);
  assert.ok(message.endsWith(`this router provides SDK ${SDK_VERSION}`), message);
});

test('a plugin that throws while loading is located in its own source, with or without source maps on', async () => {
  const dir = tempDir();
  const source = (n: number) => `const table: Record<string, number> = {};\n\nif (!table.x) throw new Error('no table ${n}');\nexport default {};\n`;
  const mapped = await loader().loadFile(write(join(dir, 'throws.ts'), source(1)));
  assert.match(errorsOf(mapped.problems).join('\n'), /throws\.ts:3:21: threw while loading: no table 1/);
  // tsx turns Node's source maps on; without them the loader maps the stack itself.
  process.setSourceMapsEnabled(false);
  try {
    const unmapped = await loader().loadFile(write(join(dir, 'throws-too.ts'), source(2)));
    assert.match(errorsOf(unmapped.problems).join('\n'), /throws-too\.ts:3:21: threw while loading: no table 2/);
  } finally {
    process.setSourceMapsEnabled(true);
  }
});

test('a name taken by a built-in or by another plugin is refused', async () => {
  const dir = tempDir();
  write(join(dir, 'a.mjs'), pluginSource('twin'));
  write(join(dir, 'b.mjs'), pluginSource('twin'));
  write(join(dir, 'c.mjs'), pluginSource('least-load'));
  const set = await loader().loadDirs([dir]);
  const errors = errorsOf(set.problems).join('\n');
  assert.match(errors, /b\.mjs:\d+:\d+: plugin "twin" is already defined by .*a\.mjs/);
  assert.match(errors, /c\.mjs:\d+:\d+: plugin "least-load" has the name of a built-in strategy/);
});

test('inline: an unchanged plugin is neither rebuilt nor re-imported; a change is; A→B→A reuses A', async () => {
  const dir = tempDir();
  const path = write(join(dir, 'p.ts'), pluginSource('p', { typed: true }));
  const l = new PluginLoader({ builtins: BUILTIN_STRATEGIES, cacheDir: tempDir('switchyard-plugin-cache-'), isolate: false });
  const first = (await l.loadFile(path)).plugin!;
  assert.deepEqual(l.stats, { builds: 1, imports: 1, reused: 0 });
  const again = (await l.loadFile(path)).plugin!;
  assert.equal(again.definition, first.definition);
  assert.deepEqual(l.stats, { builds: 1, imports: 1, reused: 1 });

  write(path, pluginSource('p', { typed: true, version: '1.0.1' }));
  const changed = (await l.loadFile(path)).plugin!;
  assert.notEqual(changed.hash, first.hash);
  assert.equal(changed.version, '1.0.1');
  assert.deepEqual(l.stats, { builds: 2, imports: 2, reused: 1 });

  write(path, pluginSource('p', { typed: true }));
  const back = (await l.loadFile(path)).plugin!;
  assert.equal(back.definition, first.definition, 'the same module: Node never loads a second copy');
  assert.deepEqual(l.stats, { builds: 3, imports: 2, reused: 1 });
});

test('caged: an unchanged plugin keeps its worker; a change starts a new one and stops the old once unused', async () => {
  const dir = tempDir();
  const path = write(join(dir, 'p.ts'), pluginSource('p', { typed: true }));
  const l = loader();
  const first = (await l.loadFile(path)).plugin!;
  assert.equal(first.cage?.state, 'running');
  const instance = first.definition.create({ label: 'one' }, { pool: 'general', loadScoreWeights: { kvUsage: 0.6, queue: 0.3, running: 0.1 } } as never);
  const again = (await l.loadFile(path)).plugin!;
  assert.equal(again.cage, first.cage);
  assert.deepEqual(l.stats, { builds: 1, imports: 1, reused: 1 });

  write(path, pluginSource('p', { typed: true, version: '1.0.1' }));
  const changed = (await l.loadFile(path)).plugin!;
  assert.notEqual(changed.cage, first.cage);
  assert.equal(first.cage!.state, 'running', 'the old version still serves the instance a live snapshot holds');
  assert.equal(expectPick(instance.pick(request(), fleet(2))).reason, 'one');
  instance.dispose!();
  assert.equal(first.cage!.state, 'stopped', 'stopped once its last instance is gone');
  assert.deepEqual(l.stats, { builds: 2, imports: 2, reused: 1 });
  await l.close();
  assert.equal(changed.cage!.state, 'stopped');
});

test('an invalid plugin config names the policy file, the path in it, and the plugin file', async () => {
  const dir = tempDir();
  write(join(dir, 'plugins', 'labelled.ts'), pluginSource('labelled', { typed: true }));
  writePolicy(dir, { pluginDirs: ['./plugins'], strategies: '\n      - name: labelled\n        config: { label: 7 }' });
  const result = await loadSnapshot(dir, { loader: loader() });
  assert.equal(result.snapshot, undefined);
  const errors = errorsOf(result.problems).join('\n');
  assert.match(
    errors,
    /pools\.yaml:8:26: strategy "labelled" \(plugin .*plugins\/labelled\.ts\): pools\[0\]\.strategies\[0\]\.config\.label: must be string, not number/,
  );
});

test('a plugin whose create() throws is reported where the policy names it; nothing is built', async () => {
  const dir = tempDir();
  write(join(dir, 'plugins', 'grumpy.mjs'), "export default { name: 'grumpy', version: '1.0.0', sdk: '^1', create() { throw new Error('no thanks'); } };");
  writePolicy(dir, { pluginDirs: ['plugins'], strategies: '[power-of-two, grumpy]' });
  const result = await loadSnapshot(dir, { loader: loader() });
  assert.equal(result.snapshot, undefined);
  assert.match(errorsOf(result.problems).join('\n'), /pools\.yaml:6:\d+: strategy "grumpy" \(plugin .*grumpy\.mjs\): create\(\) threw: no thanks/);
});

test('a plugin directory that does not exist is reported in the settings file', async () => {
  const dir = tempDir();
  writePolicy(dir, { pluginDirs: ['./nowhere'] });
  const result = await loadSnapshot(dir, { loader: loader() });
  assert.match(errorsOf(result.problems).join('\n'), /settings\.yaml:2:\d+: plugin directory "\.\/nowhere" .* does not exist/);
});

test('a policy uses a plugin from its plugin_dirs; a broken plugin anywhere in them fails the load', async () => {
  const dir = tempDir();
  write(join(dir, 'plugins', 'first.mjs'), pluginSource('first'));
  writePolicy(dir, { pluginDirs: ['plugins'], strategies: '[first]' });
  const ok = await loadSnapshot(dir, { loader: loader() });
  assert.deepEqual(errorsOf(ok.problems), []);
  assert.equal(ok.snapshot!.pools[0].chain[0].name, 'first');
  assert.deepEqual(
    ok.plugins.map((p) => p.name),
    ['first'],
  );

  write(join(dir, 'plugins', 'unused.mjs'), 'export default {');
  const broken = await loadSnapshot(dir, { loader: loader() });
  assert.equal(broken.snapshot, undefined);
  assert.match(errorsOf(broken.problems).join('\n'), /unused\.mjs:1:17: does not compile/);
});

test('the example plugin loads from a copy of examples/plugins (its test file is not a plugin)', async () => {
  const examples = new URL('../../examples/plugins/', import.meta.url).pathname;
  assert.deepEqual(
    listPluginFiles(examples).map((f) => f.slice(examples.length)),
    ['least-kv.ts'],
  );
  const dir = tempDir();
  copyFileSync(join(examples, 'least-kv.ts'), join(dir, 'least-kv.ts'));
  const set = await loader().loadDirs([dir]);
  assert.deepEqual(errorsOf(set.problems), []);
  assert.equal(set.plugins[0].name, 'least-kv');
});
