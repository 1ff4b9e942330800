// The cage's own code as the threads and processes it starts load it: each
// entry (the plugin worker, the relay, the plugin process) bundled on its own
// by esbuild, once per router process, into a file named by its hash.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

// The sibling sources in a checkout, the compiled siblings in dist/.
const sibling = (name: string) => fileURLToPath(new URL(`./${name}${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url));
export const WORKER_ENTRY = sibling('worker');
export const RELAY_ENTRY = sibling('relay');
export const CHILD_ENTRY = sibling('child');
const scripts = new Map<string, Promise<string>>();

/** The bundled file of `entry`; built on first use, and again if the file was removed since (a cleaned temp dir). */
export function scriptPath(entry: string): Promise<string> {
  let made = scripts.get(entry);
  if (made) return made.then((path) => (existsSync(path) ? path : (scripts.delete(entry), scriptPath(entry))));
  made = build({
    entryPoints: [entry],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    logLevel: 'silent',
  }).then((output) => {
    const code = output.outputFiles[0].text;
    const dir = join(tmpdir(), 'switchyard-cage');
    mkdirSync(dir, { recursive: true });
    const name = entry.replace(/^.*[\\/]/, '').replace(/\.[jt]s$/, '');
    const path = join(dir, `${name}.${createHash('sha256').update(code).digest('hex').slice(0, 16)}.mjs`);
    if (!existsSync(path)) writeFileSync(path, code);
    return path;
  });
  scripts.set(entry, made);
  return made;
}
