#!/usr/bin/env node
// The `switchyard` command. Sources are TypeScript, compiled on load by tsx:
// no build step between a checkout and a running router.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../cli/main.ts');
const code = await main(process.argv.slice(2));
// Long-running commands (serve, emulate) return once they have shut down:
// exit now rather than wait on whatever handle a library left behind.
process.exit(typeof code === 'number' ? code : 0);
