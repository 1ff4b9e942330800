// The cage's own code as the threads and processes it starts load it: each
// entry (the plugin worker, the relay, the plugin process) bundled on its own
// (core/bundled-script.ts).
import { fileURLToPath } from 'node:url';
import { bundledScript } from '../../bundled-script.ts';

// The sibling sources in a checkout, the compiled siblings in dist/.
const sibling = (name: string) => fileURLToPath(new URL(`./${name}${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url));
export const WORKER_ENTRY = sibling('worker');
export const RELAY_ENTRY = sibling('relay');
export const CHILD_ENTRY = sibling('child');

/** The bundled file of `entry`; built on first use, and again if the file was removed since (a cleaned temp dir). */
export function scriptPath(entry: string): Promise<string> {
  return bundledScript(entry, 'switchyard-cage');
}
