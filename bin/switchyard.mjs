#!/usr/bin/env node
// The `switchyard` command: runs the compiled JavaScript in dist/ (built by
// `npm ci` through the `prepare` script, or `npm run build`). No TypeScript
// at run time: production needs neither tsx nor a compiler.
import { existsSync } from 'node:fs';

const entry = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(entry)) {
  console.error('switchyard: dist/ is missing; run `npm run build` (or `npm ci`) in the Switchyard checkout first');
  process.exit(1);
}
const { main } = await import(entry.href);
const code = await main(process.argv.slice(2));
// Long-running commands (serve, emulate) return once they have shut down:
// exit now rather than wait on whatever handle a library left behind.
process.exit(typeof code === 'number' ? code : 0);
