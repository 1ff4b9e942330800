// Loads third-party strategies from plugin directories: every `.ts`, `.mts`,
// `.js` and `.mjs` file directly in a directory is one plugin. Each goes
// through esbuild (bundled to one ES module, `@switchyard/sdk` resolved to
// this router's SDK), is checked (default export shape, `sdk` range, config
// schema, unique name), and joins the built-ins in a StrategyRegistry.
//
// By default each plugin runs in a cage (cage/cage.ts): a worker thread in
// a process of its own, so a plugin that loops, leaks, aborts or crashes
// costs its time budget, never the router. Its module is imported only there; the registry holds a
// definition whose create() makes instances in the worker. A changed plugin
// gets a new cage; the old one stops once no snapshot uses it.
//
// Inline (isolate: false, for benchmarks and tests): Node can't unload an
// ES module, so a changed plugin leaks its old module. The compiled module's
// file name carries its content hash: an unchanged plugin is neither rebuilt
// nor re-imported, and A→B→A gets A's module back.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, extname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type BuildFailure, type Message, type Plugin } from 'esbuild';
import { SDK_VERSION, type Logger } from '../../sdk/types.ts';
import { definitionProblems, sdkRangeProblem } from '../../sdk/definition-checks.ts';
import { DEFAULT_CAGE_LIMITS, PluginCage, type CageLimits } from './cage/cage.ts';
import { configValidator } from './config.ts';
import { redactSecrets } from '../observe/secrets.ts';
import { registryOf, type AnyStrategy, type StrategyRegistry } from './registry.ts';
import { type PolicyProblem, displayPath } from '../diagnostics/problem.ts';

/** A plugin's file names: modules, not their tests or type declarations; hidden and `_`-prefixed files skipped. */
const PLUGIN_FILE = /^[^._].*\.(m?ts|m?js)$/;
const NOT_A_PLUGIN = /(\.d\.m?ts|\.(test|spec)\.m?[tj]s)$/;

// This router's SDK, beside this file: the sources (.ts) in a checkout, the compiled .js in dist/.
const SDK_ENTRY = fileURLToPath(new URL(`../../sdk/index${extname(fileURLToPath(import.meta.url))}`, import.meta.url));

export interface LoadedPlugin {
  readonly name: string;
  readonly version: string;
  /** The file as users should see it. */
  readonly file: string;
  /** Absolute path. */
  readonly path: string;
  /** Content hash of the compiled module: equal hashes, the same module. */
  readonly hash: string;
  readonly definition: AnyStrategy;
  /** The worker the plugin runs in; undefined when loaded inline. */
  readonly cage?: PluginCage;
}

export interface PluginSet {
  readonly plugins: readonly LoadedPlugin[];
  /** The built-ins and every plugin; `originOf(name)` names a plugin's file. */
  readonly registry: StrategyRegistry;
  /** Empty when every plugin loaded; any problem means the set must not be used. */
  readonly problems: readonly PolicyProblem[];
  /** Hash over every plugin file, loaded or refused: equal hashes, the same plugins and the same problems. */
  readonly hash: string;
}

export interface PluginLoaderOptions {
  /** The strategies that ship with the router (plugins/, handed in by cli/: core never imports plugins/); no plugin may take their names. */
  readonly builtins: readonly AnyStrategy[];
  /** Where compiled modules are written before import; default a new folder under the OS temp dir. */
  readonly cacheDir?: string;
  /** The SDK version plugins' `sdk` ranges are checked against; default SDK_VERSION. */
  readonly sdkVersion?: string;
  /** Run each plugin in a worker of its own (default true); false imports it into this thread. */
  readonly isolate?: boolean;
  /** Time and memory limits of caged plugins; DEFAULT_CAGE_LIMITS for what is not given. */
  readonly cage?: Partial<CageLimits>;
  /** Where quarantines and plugin output are logged. */
  readonly log?: Logger;
}

/**
 * Where a policy's strategies come from: a loader shared on purpose (it holds
 * the built-ins; whoever made it clears and closes it), or the built-ins alone,
 * for a loader made and closed by the one that uses it.
 */
export type StrategySource =
  | { readonly loader: PluginLoader; readonly builtins?: undefined }
  | { readonly builtins: readonly AnyStrategy[]; readonly loader?: undefined };

/** The loader a source names, or a new one with its built-ins; `owned` when new: then the caller clears and closes it. */
export function loaderFor(source: StrategySource, options: Omit<PluginLoaderOptions, 'builtins'> = {}): { loader: PluginLoader; owned: boolean } {
  if (source.loader) return { loader: source.loader, owned: false };
  return { loader: new PluginLoader({ ...options, builtins: source.builtins }), owned: true };
}

export interface LoaderStats {
  /** esbuild runs (a plugin file new or changed). */
  readonly builds: number;
  /** New modules imported: inline, each stays in memory for the life of the process; caged, each started a worker. */
  readonly imports: number;
  /** Plugin files found unchanged and reused without a build. */
  readonly reused: number;
}

interface CacheEntry {
  /** Files the plugin was built from (outside node_modules) → their content hash. */
  readonly inputs: ReadonlyMap<string, string>;
  /** The compiled module's hash, or the source's when it doesn't compile: broken files count in the set's hash too. */
  readonly hash: string;
  readonly plugin?: LoadedPlugin;
  readonly problems: readonly PolicyProblem[];
}

/** Plugin files directly in `dir`, sorted. */
export function listPluginFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((name) => PLUGIN_FILE.test(name) && !NOT_A_PLUGIN.test(name))
    .map((name) => join(dir, name))
    .filter((path) => statSync(path).isFile())
    .sort();
}

export class PluginLoader {
  readonly #builtins: readonly AnyStrategy[];
  readonly #chosenCacheDir?: string;
  #cacheDir?: string;
  readonly #sdkVersion: string;
  readonly #isolate: boolean;
  readonly #limits: CageLimits;
  readonly #log?: Logger;
  readonly #cache = new Map<string, CacheEntry>();
  /** Compiled module URL → its definition: a module imported once is never imported again. */
  readonly #modules = new Map<string, unknown>();
  #stats = { builds: 0, imports: 0, reused: 0 };

  constructor(options: PluginLoaderOptions) {
    this.#builtins = options.builtins;
    this.#chosenCacheDir = options.cacheDir;
    this.#sdkVersion = options.sdkVersion ?? SDK_VERSION;
    this.#isolate = options.isolate ?? true;
    this.#log = options.log;
    this.#limits = { ...DEFAULT_CAGE_LIMITS, callTimeoutMs: this.#pickTimeoutFromEnv(), ...options.cage };
    // A misspelt isolation must not pass unnoticed: the process cage stands, and the log says why.
    const asked = process.env.SWITCHYARD_PLUGIN_ISOLATION;
    if (asked !== undefined && asked !== 'process' && asked !== 'thread') {
      this.#log?.warn(`SWITCHYARD_PLUGIN_ISOLATION=${JSON.stringify(asked.slice(0, 40))} is neither "process" nor "thread": plugins run in processes`);
    }
  }

  /**
   * SWITCHYARD_PLUGIN_PICK_TIMEOUT_MS: how long a request waits for a caged
   * plugin's pick (docs/plugins.md). Below the stuck limit, so a slow plugin is
   * skipped before it is quarantined; anything else keeps the default, logged.
   */
  #pickTimeoutFromEnv(): number {
    const asked = process.env.SWITCHYARD_PLUGIN_PICK_TIMEOUT_MS;
    const fallback = DEFAULT_CAGE_LIMITS.callTimeoutMs;
    if (asked === undefined || asked === '') return fallback;
    const ms = /^\d{1,4}$/.test(asked) ? Number(asked) : Number.NaN;
    if (ms >= 1 && ms < DEFAULT_CAGE_LIMITS.stuckAfterMs) return ms;
    this.#log?.warn(
      `SWITCHYARD_PLUGIN_PICK_TIMEOUT_MS=${JSON.stringify(asked.slice(0, 40))} is not a whole number of ms from 1 to ${DEFAULT_CAGE_LIMITS.stuckAfterMs - 1}: plugins' picks wait ${fallback} ms`,
    );
    return fallback;
  }

  get stats(): LoaderStats {
    return { ...this.#stats };
  }

  /** Every plugin of `dirs`, with the built-ins, as one registry; all files are checked, every problem reported. */
  async loadDirs(dirs: readonly string[]): Promise<PluginSet> {
    const problems: PolicyProblem[] = [];
    const files: string[] = [];
    for (const dir of dirs) {
      if (!existsSync(dir) || !statSync(dir).isDirectory()) {
        problems.push({ file: displayPath(dir), line: 1, col: 1, message: 'plugin directory does not exist' });
        continue;
      }
      files.push(...listPluginFiles(dir));
    }
    const results = await Promise.all(files.map((path) => this.loadFile(path)));
    // A plugin file that is gone: its cage stops once no snapshot uses it.
    const listed = new Set(files.map((path) => resolve(path)));
    for (const [path, entry] of this.#cache) {
      if (listed.has(path)) continue;
      entry.plugin?.cage?.retire();
      this.#cache.delete(path);
    }
    const hash = createHash('sha256');
    files.forEach((path, i) => hash.update(path).update('\0').update(results[i].hash).update('\0'));
    const plugins: LoadedPlugin[] = [];
    const builtinNames = new Set(this.#builtins.map((d) => d.name));
    const byName = new Map<string, LoadedPlugin>();
    for (const result of results) {
      problems.push(...result.problems);
      const plugin = result.plugin;
      if (!plugin) continue;
      const at = { file: plugin.file, ...locateDefaultExport(plugin.path) };
      if (builtinNames.has(plugin.name)) {
        problems.push({ ...at, message: `plugin "${plugin.name}" has the name of a built-in strategy; choose another name` });
        continue;
      }
      const other = byName.get(plugin.name);
      if (other) {
        problems.push({ ...at, message: `plugin "${plugin.name}" is already defined by ${other.file}` });
        continue;
      }
      byName.set(plugin.name, plugin);
      plugins.push(plugin);
    }
    const origins = new Map(plugins.map((p) => [p.name, p.file]));
    return {
      plugins,
      registry: registryOf([...this.#builtins, ...plugins.map((p) => p.definition)], origins),
      problems,
      hash: hash.digest('hex').slice(0, 16),
    };
  }

  /** One plugin file: reused when it and the files it imports are unchanged, else built, imported and checked. */
  async loadFile(path: string): Promise<{ plugin?: LoadedPlugin; problems: readonly PolicyProblem[]; hash: string }> {
    const absolute = resolve(path);
    const cached = this.#cache.get(absolute);
    if (cached && unchanged(cached.inputs)) {
      this.#stats.reused++;
      return cached;
    }
    const entry = await this.#build(absolute);
    if (cached?.plugin?.cage !== entry.plugin?.cage) cached?.plugin?.cage?.retire();
    this.#cache.set(absolute, entry);
    return entry;
  }

  /** Created on first use, so a policy without plugins leaves nothing behind. */
  #dir(): string {
    this.#cacheDir ??= this.#chosenCacheDir ?? mkdtempSync(join(tmpdir(), 'switchyard-plugins-'));
    return this.#cacheDir;
  }

  async #build(path: string): Promise<CacheEntry> {
    const file = displayPath(path);
    const cacheDir = this.#dir();
    const dir = dirname(path);
    this.#stats.builds++;
    let output;
    try {
      output = await build({
        entryPoints: [path],
        absWorkingDir: dir,
        outfile: join(cacheDir, 'plugin.mjs'),
        bundle: true,
        write: false,
        format: 'esm',
        platform: 'node',
        target: 'node20',
        metafile: true,
        sourcemap: 'external',
        sourcesContent: false,
        logLevel: 'silent',
        plugins: [sdkAlias],
      });
    } catch (error) {
      const failure = error as BuildFailure;
      const inputs = hashInputs(dir, [path]);
      const hash = `source:${inputs.get(path) ?? 'missing'}`;
      if (!Array.isArray(failure.errors)) return { inputs, hash, problems: [{ file, line: 1, col: 1, message: `does not compile: ${String(error)}` }] };
      return { inputs, hash, problems: failure.errors.map((m) => compileProblem(m, dir, file)) };
    }
    const inputs = hashInputs(dir, [path, ...Object.keys(output.metafile.inputs).map((input) => resolve(dir, input))]);
    // The map comment names the placeholder outfile: drop it, hash the code, name the file by the hash.
    const code = output.outputFiles.find((f) => f.path.endsWith('.mjs'))!.text.replace(/\/\/# sourceMappingURL=\S+\s*$/, '');
    const map = output.outputFiles.find((f) => f.path.endsWith('.map'))?.text;
    const hash = sha256(code).slice(0, 16);
    const url = this.#write(path, hash, code, map);

    if (this.#isolate) return this.#cage(path, url, map, file, inputs, hash, cacheDir);
    let namespace: { default?: unknown };
    try {
      namespace = (await this.#import(url)) as { default?: unknown };
    } catch (error) {
      return { inputs, hash, problems: [loadProblem(error, path, url, map, file, cacheDir)] };
    }
    const definition = namespace.default;
    const at = { file, ...locateDefaultExport(path) };
    if (definition === undefined) return { inputs, hash, problems: [noDefaultExport(at, Object.keys(namespace))] };
    const shape = definitionProblems(definition);
    if (shape.length) return { inputs, hash, problems: shape.map((message) => ({ ...at, message: `not a strategy definition: ${message}` })) };
    const strategy = definition as AnyStrategy;
    const problem = this.#checkDefinition(strategy, at);
    if (problem) return { inputs, hash, problems: [problem] };
    return { inputs, hash, problems: [], plugin: { name: strategy.name, version: strategy.version, file, path, hash, definition: strategy } };
  }

  /** Starts the plugin's worker; its module is checked there, its sdk range and config schema here. */
  async #cage(
    path: string,
    url: string,
    map: string | undefined,
    file: string,
    inputs: Map<string, string>,
    hash: string,
    cacheDir: string,
  ): Promise<CacheEntry> {
    this.#stats.imports++;
    const started = await PluginCage.start(url, file, this.#limits, this.#log);
    const at = { file, ...locateDefaultExport(path) };
    // What the worker reports is the plugin's own text (an error it threw, its export names): scrubbed of the router's secrets.
    const scrubbed = (problems: PolicyProblem[]) => ({ inputs, hash, problems: problems.map((p) => ({ ...p, message: redactSecrets(p.message) })) });
    switch (started.kind) {
      case 'threw':
        return scrubbed([loadProblem(started.error, path, url, map, file, cacheDir)]);
      case 'failed':
        return scrubbed([{ ...at, message: `could not be loaded: ${started.message}` }]);
      case 'refused':
        if (!started.hasDefault) return scrubbed([noDefaultExport(at, started.exports)]);
        return scrubbed(started.problems.map((message) => ({ ...at, message: `not a strategy definition: ${message}` })));
    }
    const { cage, definition: described } = started;
    const definition: AnyStrategy = {
      name: described.name,
      version: described.version,
      sdk: described.sdk,
      description: described.description,
      configSchema: described.configSchema,
      create: (config, ctx) => cage.create(config, ctx),
    };
    const problem = this.#checkDefinition(definition, at);
    if (problem) {
      void cage.close();
      return { inputs, hash, problems: [problem] };
    }
    return { inputs, hash, problems: [], plugin: { name: definition.name, version: definition.version, file, path, hash, definition, cage } };
  }

  /** What the router checks of any definition: its sdk range accepts this SDK, its config schema compiles. */
  #checkDefinition(strategy: AnyStrategy, at: { file: string; line: number; col: number }): PolicyProblem | undefined {
    const range = sdkRangeProblem(strategy, this.#sdkVersion);
    if (range) return { ...at, message: `refused: ${range}` };
    try {
      configValidator(strategy);
    } catch (error) {
      return { ...at, message: `strategy "${strategy.name}": configSchema is not a valid JSON Schema: ${(error as Error).message}` };
    }
    return undefined;
  }

  /**
   * Writes a compiled module once (atomically), named by its hash, with its
   * source map beside it: `node --enable-source-maps` then shows plugin
   * stack traces in the plugin's own lines.
   */
  #write(path: string, hash: string, code: string, map: string | undefined): string {
    const stem = basename(path, extname(path)).replace(/[^A-Za-z0-9_-]/g, '_');
    const name = `${stem}.${hash}.mjs`;
    const target = join(this.#dir(), name);
    const url = pathToFileURL(target).href;
    if (this.#modules.has(url) || existsSync(target)) return url;
    mkdirSync(this.#dir(), { recursive: true });
    if (map) writeFileSync(`${target}.map`, map);
    const temporary = `${target}.${process.pid}.tmp`;
    writeFileSync(temporary, map ? `${code}//# sourceMappingURL=${name}.map\n` : code);
    renameSync(temporary, target);
    return url;
  }

  async #import(url: string): Promise<unknown> {
    if (this.#modules.has(url)) return this.#modules.get(url);
    this.#stats.imports++;
    const namespace = await import(url);
    this.#modules.set(url, namespace);
    return namespace;
  }

  /**
   * Removes the compiled modules from disk once nothing more will be loaded
   * (loaded modules stay in memory: Node can't unload them). A later load
   * writes them again.
   */
  clearCacheDir(): void {
    if (this.#cacheDir) rmSync(this.#cacheDir, { recursive: true, force: true });
    this.#cacheDir = undefined;
  }

  /** Stops every plugin worker (the router is shutting down). */
  async close(): Promise<void> {
    await Promise.all([...this.#cache.values()].map((entry) => entry.plugin?.cage?.close()));
  }
}

/** `import ... from '@switchyard/sdk'` in a plugin resolves to this router's SDK, bundled in. */
const sdkAlias: Plugin = {
  name: 'switchyard-sdk',
  setup(b) {
    b.onResolve({ filter: /^@switchyard\/sdk$/ }, () => ({ path: SDK_ENTRY }));
  },
};

function noDefaultExport(at: { file: string; line: number; col: number }, names: readonly string[]): PolicyProblem {
  return {
    ...at,
    message: `no default export${names.length ? ` (it exports ${names.join(', ')})` : ''}: a plugin default-exports { name, version, sdk, create }`,
  };
}

function compileProblem(message: Message, dir: string, file: string): PolicyProblem {
  const location = message.location;
  const where = location?.file ? displayPath(resolve(dir, location.file)) : file;
  const text = where === file ? message.text : `${message.text} (bundling ${file})`;
  return { file: where, line: location?.line ?? 1, col: (location?.column ?? 0) + 1, message: `does not compile: ${text}` };
}

/**
 * A throw while the module evaluated, located in the plugin's source: from
 * the stack when source maps are on (tsx and --enable-source-maps map it
 * already), else through the build's source map.
 */
function loadProblem(error: unknown, path: string, url: string, map: string | undefined, file: string, mapDir: string): PolicyProblem {
  const message = error instanceof Error ? error.message : String(error);
  const stack = error instanceof Error ? (error.stack ?? '') : '';
  const mapped = new RegExp(`(?:${escapeRegExp(pathToFileURL(path).href)}|${escapeRegExp(path)}):(\\d+):(\\d+)`).exec(stack);
  if (mapped) return { file, line: Number(mapped[1]), col: Number(mapped[2]), message: `threw while loading: ${message}` };
  const found = new RegExp(`${escapeRegExp(url)}:(\\d+):(\\d+)`).exec(stack);
  if (found && map) {
    try {
      const entry = new SourceMap(JSON.parse(map)).findEntry(Number(found[1]) - 1, Number(found[2]) - 1) as {
        originalSource?: string;
        originalLine?: number;
        originalColumn?: number;
      };
      if (entry.originalSource !== undefined && entry.originalLine !== undefined) {
        const source = entry.originalSource.startsWith('file:') ? fileURLToPath(entry.originalSource) : resolve(mapDir, entry.originalSource);
        return { file: displayPath(source), line: entry.originalLine + 1, col: (entry.originalColumn ?? 0) + 1, message: `threw while loading: ${message}` };
      }
    } catch {
      // No usable mapping: report at the top of the file.
    }
  }
  return { file, line: 1, col: 1, message: `threw while loading: ${message}` };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Where `export default` is, for problems with the export itself. */
function locateDefaultExport(path: string): { line: number; col: number } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return { line: 1, col: 1 };
  }
  const at = /export\s+default\b|module\.exports\b/.exec(text)?.index ?? 0;
  const before = text.slice(0, at).split('\n');
  return { line: before.length, col: before[before.length - 1].length + 1 };
}

function hashInputs(dir: string, paths: readonly string[]): Map<string, string> {
  const inputs = new Map<string, string>();
  for (const path of paths) {
    const rel = relative(dir, path);
    // Only the plugin's own files: dependencies and the SDK don't change under a running router.
    if (rel.startsWith('..') || rel.split(sep).includes('node_modules') || inputs.has(path)) continue;
    inputs.set(path, contentHash(path));
  }
  return inputs;
}

function unchanged(inputs: ReadonlyMap<string, string>): boolean {
  for (const [path, hash] of inputs) if (contentHash(path) !== hash) return false;
  return true;
}

function contentHash(path: string): string {
  try {
    return sha256(readFileSync(path));
  } catch {
    return 'missing';
  }
}

function sha256(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}
