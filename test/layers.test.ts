// The layers, enforced (docs/design.md, "Layers"): reads every import of the
// repository's TypeScript and JavaScript sources and fails on any that crosses
// a layer the wrong way. Each offence is printed as `FILE: imports X (rule)`.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { test } from 'node:test';

const ROOT = resolve(import.meta.dirname, '..');
const SOURCE_DIRS = ['bin', 'cli', 'core', 'sdk', 'plugins', 'sim', 'bench', 'test', 'examples', 'scripts'];
const SOURCE = /\.(ts|mts|js|mjs)$/;

/** One import of one file: the specifier as written and, for a relative one, the repository path it names. */
export interface ImportEdge {
  readonly file: string;
  readonly specifier: string;
  /** Repository-relative target, with `/` separators; undefined for a package or `node:` import. */
  readonly target?: string;
  readonly dynamic: boolean;
  /** `import type` / `export type`: gone from the compiled JavaScript. */
  readonly typeOnly: boolean;
}

interface Rule {
  readonly name: string;
  /** Files the rule applies to (repository-relative, `/` separators). */
  readonly from: (file: string) => boolean;
  /** True when the import breaks the rule. */
  readonly forbids: (edge: ImportEdge) => boolean;
}

const MANIFEST = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
/** The package a bare specifier names: `ajv`, `@opentelemetry/api`; undefined for `node:` and built-in modules. */
const packageOf = (specifier: string) => {
  if (specifier.startsWith('node:') || builtinModules.includes(specifier.split('/')[0])) return undefined;
  return specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');
};

const under =
  (...dirs: string[]) =>
  (path: string | undefined) =>
    path !== undefined && dirs.some((d) => path.startsWith(`${d}/`));
const isTestKit = under('sdk/testkit');

/** The layers: cli wires core, sim and plugins together; sim stands on core; core on sdk; plugins see only sdk. */
const LAYER_RULES: readonly Rule[] = [
  {
    name: 'core never imports sim, cli, plugins, bench, test or examples',
    from: under('core'),
    forbids: (e) => under('sim', 'cli', 'plugins', 'bench', 'test', 'examples', 'scripts', 'bin')(e.target),
  },
  { name: 'plugins import only the sdk', from: under('plugins'), forbids: (e) => e.target !== undefined && !under('sdk', 'plugins')(e.target) },
  { name: 'the sdk imports nothing of ours', from: under('sdk'), forbids: (e) => e.target !== undefined && !under('sdk')(e.target) },
  {
    name: 'sim never imports cli or plugins (cli hands it the strategies)',
    from: under('sim'),
    forbids: (e) => under('cli', 'plugins', 'bench', 'examples', 'scripts', 'bin')(e.target),
  },
  { name: 'only tests and benchmarks import tests', from: (f) => !under('test', 'bench')(f), forbids: (e) => under('test')(e.target) },
  { name: 'the SDK test kit is for plugin tests, not the router', from: under('core', 'cli', 'sim', 'plugins', 'bin'), forbids: (e) => isTestKit(e.target) },
  { name: 'the sdk proper never imports its test kit', from: (f) => under('sdk')(f) && !isTestKit(f), forbids: (e) => isTestKit(e.target) },
  {
    name: 'lab-only packages (vega, vega-lite, tsx) stay out of the router',
    from: under('core', 'cli', 'sdk', 'plugins', 'bin'),
    forbids: (e) => e.target === undefined && /^(vega|vega-lite|tsx)(\/|$)/.test(e.specifier),
  },
  {
    name: 'what production runs imports only production dependencies (npm ci --omit=dev)',
    from: under('core', 'cli', 'sdk', 'plugins', 'sim', 'bin'),
    forbids: (e) => {
      const name = e.target === undefined && !e.typeOnly && !e.dynamic ? packageOf(e.specifier) : undefined;
      return name !== undefined && !(name in MANIFEST.dependencies);
    },
  },
  {
    name: 'plots load only when an experiment runs',
    from: under('sim'),
    forbids: (e) => !e.dynamic && e.target === undefined && /^(vega|vega-lite)(\/|$)/.test(e.specifier) && !e.typeOnly,
  },
];

/**
 * Rules between core's own modules. Policy loading uses the plugin loader;
 * the plugin loader never reaches back into policy (both report through
 * core/diagnostics), so the two can't form a cycle. core/policy compiles
 * files into plain data and knows nothing of the runtime that decides with it
 * (core/decide: generations, strategy instances, candidate caches, the store);
 * the layers above reach the policy through that runtime (docs/design.md,
 * "Layers").
 */
const CORE_INTERNAL_RULES: readonly Rule[] = [
  {
    name: 'core/policy never imports the runtime (core/decide) or the cage',
    from: under('core/policy'),
    forbids: (e) => under('core/decide', 'core/plugins/cage')(e.target),
  },
  { name: 'core/policy never imports serve or shadow', from: under('core/policy'), forbids: (e) => under('core/serve', 'core/shadow')(e.target) },
  { name: 'core/serve reaches the policy only through the runtime (core/decide)', from: under('core/serve'), forbids: (e) => under('core/policy')(e.target) },
  { name: 'core/decide never imports serve or shadow', from: under('core/decide'), forbids: (e) => under('core/serve', 'core/shadow')(e.target) },
  {
    name: 'core/plugins never imports core/policy (shared diagnostics live in core/diagnostics)',
    from: under('core/plugins'),
    forbids: (e) => under('core/policy')(e.target),
  },
  {
    name: 'core/diagnostics imports neither core/policy nor core/plugins',
    from: under('core/diagnostics'),
    forbids: (e) => under('core/policy', 'core/plugins')(e.target),
  },
];

const RULES = [...LAYER_RULES, ...CORE_INTERNAL_RULES];

/**
 * Crossings still in the code, each file with the one rule it may break (say
 * its way out beside the entry). None today: the built-in strategies are
 * listed in plugins/index.ts and cli/ hands them to core. A test below fails
 * when an entry is no longer needed.
 */
const KNOWN_CROSSINGS: ReadonlyMap<string, string> = new Map();

function sourceFiles(dir: string): string[] {
  const found: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    if (name === 'node_modules' || name === 'dist' || name.startsWith('.')) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) found.push(...sourceFiles(path));
    else if (SOURCE.test(name) && !name.endsWith('.d.ts')) found.push(path);
  }
  return found;
}

const posix = (path: string) => path.split(sep).join('/');

/**
 * The import specifiers of one source text: `import ... from 'x'`, `import 'x'`,
 * `export ... from 'x'`, `import('x')`. A linear scan that skips comments and
 * the insides of strings and template literals, so an import written in a
 * comment or a string (a test's fixture plugin) is not counted.
 */
export function importsOf(text: string): { specifier: string; dynamic: boolean; typeOnly: boolean }[] {
  const found: { specifier: string; dynamic: boolean; typeOnly: boolean }[] = [];
  let i = 0;
  const n = text.length;
  // Code (outside comments and strings) since the last statement boundary, to read `import type`.
  let statement = '';
  const skipString = (quote: string): string => {
    const start = ++i;
    while (i < n && text[i] !== quote) {
      if (text[i] === '\\') i++;
      else if (text[i] === '\n' && quote !== '`') break;
      i++;
    }
    const value = text.slice(start, i);
    i++;
    return value;
  };
  while (i < n) {
    const c = text[i];
    if (c === '/' && text[i + 1] === '/') {
      while (i < n && text[i] !== '\n') i++;
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      i = end < 0 ? n : end + 2;
    } else if (c === "'" || c === '"') {
      const value = skipString(c);
      const head = statement.trimEnd();
      const isStatic = /(^|[\s;}])(import|export)\b[^;]*\bfrom\s*$/.test(head) || /(^|[\s;}])import\s*$/.test(head);
      const isDynamic = /\bimport\s*\(\s*$/.test(head);
      if (isStatic || isDynamic) {
        const typeOnly = isStatic && /(^|[\s;}])(import|export)\s+type\b/.test(head);
        found.push({ specifier: value, dynamic: isDynamic, typeOnly });
      }
      statement += '""';
    } else if (c === '`') {
      // Template literal: skipped whole, with any ${...} inside (no imports live there).
      i++;
      let depth = 0;
      while (i < n) {
        if (text[i] === '\\') i += 2;
        else if (depth === 0 && text[i] === '`') break;
        else if (text[i] === '$' && text[i + 1] === '{') {
          depth++;
          i += 2;
        } else if (depth > 0 && text[i] === '}') {
          depth--;
          i++;
        } else i++;
      }
      i++;
      statement += '``';
    } else {
      if (c === ';') statement = '';
      else statement += c;
      // A statement only needs its last few hundred characters to be recognised.
      if (statement.length > 2000) statement = statement.slice(-1000);
      i++;
    }
  }
  return found;
}

function edgesOf(path: string): ImportEdge[] {
  const file = posix(relative(ROOT, path));
  return importsOf(readFileSync(path, 'utf8')).map(({ specifier, dynamic, typeOnly }) => {
    const target = specifier.startsWith('.') ? posix(relative(ROOT, resolve(dirname(path), specifier))) : undefined;
    return { file, specifier, target, dynamic, typeOnly };
  });
}

const files = SOURCE_DIRS.filter((d) => {
  try {
    return statSync(join(ROOT, d)).isDirectory();
  } catch {
    return false;
  }
}).flatMap((d) => sourceFiles(join(ROOT, d)));

test('no import crosses a layer the wrong way', () => {
  const offences: string[] = [];
  let count = 0;
  for (const path of files) {
    for (const edge of edgesOf(path)) {
      count++;
      for (const rule of RULES) {
        if (KNOWN_CROSSINGS.get(edge.file) === rule.name) continue;
        if (rule.from(edge.file) && rule.forbids(edge)) offences.push(`${edge.file}: imports ${edge.specifier} (${rule.name})`);
      }
    }
  }
  // A scanner that found nothing would pass every rule.
  assert.ok(files.length > 100 && count > 500, `read ${files.length} files, ${count} imports`);
  if (offences.length) assert.fail(`${offences.length} imports cross a layer:\n${offences.join('\n')}`);
});

test('the scanner reads static, re-exported, side-effect and dynamic imports, and skips comments and strings', () => {
  const text = [
    "import a from './a.ts';",
    "import type { B } from '../b.ts';",
    'import {\n  c,\n  d,\n} from "./cd.ts";',
    "export { e } from './e.ts';",
    "export * from './f.ts';",
    "import './side-effect.ts';",
    "const g = await import('./g.ts');",
    "// import x from './commented.ts';",
    "/* import y from './block.ts'; */",
    'const s = "import z from \'./in-a-string.ts\'";',
    "const t = `import w from './in-a-template.ts' ${1 + 1}`;",
    "const from = 'not-an-import';",
  ].join('\n');
  assert.deepEqual(importsOf(text), [
    { specifier: './a.ts', dynamic: false, typeOnly: false },
    { specifier: '../b.ts', dynamic: false, typeOnly: true },
    { specifier: './cd.ts', dynamic: false, typeOnly: false },
    { specifier: './e.ts', dynamic: false, typeOnly: false },
    { specifier: './f.ts', dynamic: false, typeOnly: false },
    { specifier: './side-effect.ts', dynamic: false, typeOnly: false },
    { specifier: './g.ts', dynamic: true, typeOnly: false },
  ]);
});

test('a crossing is caught and named', () => {
  const edge: ImportEdge = {
    file: 'core/serve/server.ts',
    specifier: '../../sim/emulator/embedded-fleet.ts',
    target: 'sim/emulator/embedded-fleet.ts',
    dynamic: false,
    typeOnly: false,
  };
  const broken = RULES.filter((r) => r.from(edge.file) && r.forbids(edge)).map((r) => r.name);
  assert.deepEqual(broken, ['core never imports sim, cli, plugins, bench, test or examples']);
  const devOnly: ImportEdge = { file: 'core/serve/proxy.ts', specifier: 'openai', dynamic: false, typeOnly: false };
  assert.deepEqual(
    RULES.filter((r) => r.from(devOnly.file) && r.forbids(devOnly)).map((r) => r.name),
    ['what production runs imports only production dependencies (npm ci --omit=dev)'],
  );
  const builtin: ImportEdge = { file: 'core/serve/proxy.ts', specifier: 'node:fs', dynamic: false, typeOnly: false };
  assert.deepEqual(
    RULES.filter((r) => r.from(builtin.file) && r.forbids(builtin)),
    [],
  );
});

test('every known crossing still crosses (else its entry goes)', () => {
  for (const [file, ruleName] of KNOWN_CROSSINGS) {
    const rule = RULES.find((r) => r.name === ruleName)!;
    const crossing = edgesOf(join(ROOT, file)).filter((e) => rule.from(e.file) && rule.forbids(e));
    assert.ok(crossing.length > 0, `${file} no longer breaks "${ruleName}": remove it from KNOWN_CROSSINGS`);
  }
});
