#!/usr/bin/env node
// `npm run format`: Biome's formatter over the tree (biome.json), run until a
// check finds nothing left to change. Biome 2.6.8 settles a few long member
// chains only on its second pass; three passes is the most it has needed.
import { spawnSync } from 'node:child_process';

const root = new URL('..', import.meta.url).pathname;
const biome = new URL('../node_modules/@biomejs/biome/bin/biome', import.meta.url).pathname;
const run = (quiet, ...args) => spawnSync(process.execPath, [biome, ...args], { cwd: root, stdio: ['ignore', 'ignore', quiet ? 'ignore' : 'inherit'] }).status;

for (let pass = 1; pass <= 3; pass++) {
  if (run(false, 'format', '--write', '.') !== 0) process.exit(1);
  if (run(true, 'format', '.') === 0) {
    console.log(`format: done in ${pass} pass${pass === 1 ? '' : 'es'}`);
    process.exit(0);
  }
}
console.error('format: still changing after 3 passes; run `npx biome format .` to see where');
process.exit(1);
