// A worker's or child process's code as a file it can load: the entry and
// everything it imports bundled by esbuild, once per router process, into a
// temporary folder under a name that carries the code's hash (a checkout runs
// TypeScript, dist/ runs JavaScript; the bundle loads the same either way).
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const scripts = new Map<string, Promise<string>>();

/**
 * The bundled file of `entry` in `tmpdir()/folder`; built on first use, and
 * again if the file was removed since (a cleaned temporary folder).
 */
export function bundledScript(entry: string, folder: string): Promise<string> {
  const key = `${folder}\0${entry}`;
  const made = scripts.get(key);
  if (made) return made.then((path) => (existsSync(path) ? path : (scripts.delete(key), bundledScript(entry, folder))));
  // esbuild loads only when something is bundled: a router without plugins or KV events never pays for it.
  const building = import('esbuild')
    .then(({ build }) => build({ entryPoints: [entry], bundle: true, write: false, format: 'esm', platform: 'node', target: 'node20', logLevel: 'silent' }))
    .then((output) => {
      const code = output.outputFiles[0].text;
      const dir = join(tmpdir(), folder);
      mkdirSync(dir, { recursive: true });
      const name = entry.replace(/^.*[\\/]/, '').replace(/\.[jt]s$/, '');
      const path = join(dir, `${name}.${createHash('sha256').update(code).digest('hex').slice(0, 16)}.mjs`);
      if (!existsSync(path)) writeFileSync(path, code);
      return path;
    });
  // A failed build is not kept: the next call tries again.
  building.catch(() => scripts.delete(key));
  scripts.set(key, building);
  return building;
}
