// Everything a snapshot is built from (load.ts builds it), read once: the policy files' texts,
// the plugins their settings name (plugin_dirs), and the control plane's
// routing table. One content hash over all of it: equal hashes, nothing to
// rebuild. Building then never touches the disk again, so what was hashed is
// exactly what becomes policy.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { PluginLoader, PluginSet } from '../plugins/loader.ts';
import type { StrategyRegistry } from '../plugins/registry.ts';
import type { RoutingTable } from './routing-table.ts';
import { checkSchema } from './schemas.ts';
import { listPolicyFiles, parsePolicyText } from './source.ts';
import { type PolicyProblem, displayPath } from '../diagnostics/problem.ts';

export interface PolicyFileText {
  /** Absolute path. */
  readonly path: string;
  /** As users should see it. */
  readonly file: string;
  readonly text: string;
}

export interface PolicyInputs {
  readonly dir: string;
  readonly files: readonly PolicyFileText[];
  /** Absolute plugin directories named by the settings (existing or not). */
  readonly pluginDirs: readonly string[];
  readonly plugins: PluginSet;
  readonly table?: RoutingTable;
  /** Over files, plugins and table. */
  readonly hash: string;
  /** Problems found while reading (missing directory, a plugin that won't load): nothing may be built. */
  readonly problems: readonly PolicyProblem[];
  /** Files that changed while being read (a writer is mid-save): read again shortly instead of building. */
  readonly unsettled: readonly string[];
}

export interface ReadOptions {
  readonly loader: PluginLoader;
  readonly table?: RoutingTable;
}

/** Reads a policy directory and the plugins it names. Never throws for bad input: problems come back. */
export async function readPolicyInputs(dir: string, options: ReadOptions): Promise<PolicyInputs> {
  const problems: PolicyProblem[] = [];
  const files: PolicyFileText[] = [];
  const unsettled: string[] = [];
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    problems.push({ file: displayPath(dir), line: 1, col: 1, message: 'not a directory of policy files' });
  } else {
    for (const path of listPolicyFiles(dir)) {
      const read = readSettled(path);
      if (read === undefined) unsettled.push(displayPath(path));
      else files.push({ path, file: displayPath(path), text: read });
    }
    if (files.length === 0 && unsettled.length === 0 && !options.table) {
      problems.push({ file: displayPath(dir), line: 1, col: 1, message: 'no policy files (*.yaml, *.yml, *.json) here' });
    }
  }

  const { dirs: pluginDirs, problems: dirProblems } = pluginDirsOf(files);
  problems.push(...dirProblems);
  const plugins = await options.loader.loadDirs(pluginDirs.filter((d) => existsSync(d)));
  problems.push(...plugins.problems);

  const hash = createHash('sha256');
  for (const f of [...files].sort((a, b) => (a.path < b.path ? -1 : 1))) hash.update(f.path).update('\0').update(f.text).update('\0');
  hash.update(`plugins:${plugins.hash}\0table:${options.table?.hash ?? '-'}`);
  return { dir, files, pluginDirs, plugins, table: options.table, hash: hash.digest('hex').slice(0, 16), problems, unsettled };
}

/**
 * In-memory policy files (name → text) as inputs, with the strategies of
 * `registry` (the built-ins, handed in: core never imports plugins/) and no
 * plugin directories: for tests, benchmarks and the simulator's experiments.
 */
export function policyInputsFromTexts(texts: Record<string, string>, options: { registry: StrategyRegistry }): PolicyInputs {
  const files = Object.entries(texts).map(([file, text]) => ({ path: file, file, text }));
  const hash = createHash('sha256');
  for (const f of files) hash.update(f.file).update('\0').update(f.text).update('\0');
  return {
    dir: '',
    files,
    pluginDirs: [],
    plugins: { plugins: [], registry: options.registry, problems: [], hash: '' },
    hash: hash.digest('hex').slice(0, 16),
    problems: [],
    unsettled: [],
  };
}

/** A file's text, read so that a save in progress is noticed: undefined when it kept changing. */
function readSettled(path: string): string | undefined {
  for (let attempt = 0; attempt < 3; attempt++) {
    const before = statSync(path);
    const text = readFileSync(path, 'utf8');
    const after = statSync(path);
    if (before.mtimeMs === after.mtimeMs && before.size === after.size) return text;
  }
  return undefined;
}

/** The plugin directories a settings document names, resolved against its file. */
function pluginDirsOf(files: readonly PolicyFileText[]): { dirs: string[]; problems: PolicyProblem[] } {
  const dirs: string[] = [];
  const problems: PolicyProblem[] = [];
  for (const f of files) {
    // Cheap pre-check; the full parse (and any error in it) comes with the build.
    if (!/^\s*kind\s*:\s*["']?settings\b/m.test(f.text) && !/"kind"\s*:\s*"settings"/.test(f.text)) continue;
    const { source } = parsePolicyText(f.file, f.text);
    if (!source || checkSchema(source).problems.length) continue;
    const listed = (source.data as { plugin_dirs?: string[] }).plugin_dirs ?? [];
    listed.forEach((entry, i) => {
      const dir = resolve(dirname(f.path), entry);
      if (!existsSync(dir) || !statSync(dir).isDirectory()) {
        problems.push({ file: f.file, ...source.locate(['plugin_dirs', i]), message: `plugin directory "${entry}" (${displayPath(dir)}) does not exist` });
      }
      if (!dirs.includes(dir)) dirs.push(dir);
    });
  }
  return { dirs, problems };
}
