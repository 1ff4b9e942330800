#!/usr/bin/env node
// `npm run lint`, run by `npm test` before the tests: Biome's linter over every
// .ts/.mjs/.js file git tracks (biome.json says which rules, and why), warnings
// counted as errors. The rules and the switch below: docs/contributing.md.
import { spawnSync } from 'node:child_process';

// The format check: `npm run lint` also fails on a file the formatter would
// change (`npm run format` fixes it). Kept as a switch for a branch that must
// land before it is formatted.
const CHECK_FORMAT = true;

const root = new URL('..', import.meta.url).pathname;
const biome = new URL('../node_modules/@biomejs/biome/bin/biome', import.meta.url).pathname;
const args = [CHECK_FORMAT ? 'check' : 'lint', '--error-on-warnings', '--no-errors-on-unmatched', ...process.argv.slice(2)];
if (process.argv.length <= 2) args.push('.');
const result = spawnSync(process.execPath, [biome, ...args], { cwd: root, stdio: 'inherit' });
if (result.error) {
  console.error(`lint: could not run Biome (${result.error.message}); run \`npm ci\` to install it`);
  process.exit(1);
}
process.exit(result.status ?? 1);
