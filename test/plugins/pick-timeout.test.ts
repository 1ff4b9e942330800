// SWITCHYARD_PLUGIN_PICK_TIMEOUT_MS: how long a request waits for a caged
// plugin's pick. A plugin that takes 60 ms is skipped at the default 20 ms and
// answers when the operator allows 400; a value that is not a number of ms
// keeps the default and says so in the log.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { PluginLoader } from '../../core/plugins/loader.ts';
import { context, fleet, request } from '../../sdk/testkit/index.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';
import { cleanup, tempDir, write } from './fixtures.ts';

after(cleanup);

const SLOW = `
export default {
  name: 'slow', version: '1.0.0', sdk: '^1',
  create() {
    return {
      pick(_request, candidates) {
        const until = Date.now() + 60;
        while (Date.now() < until);
        return { replica: candidates[1].id, reason: 'took 60 ms' };
      },
    };
  },
};
`;

const BUSY = 'skipped: its worker is still busy';

async function pickWith(env: string | undefined): Promise<{ outcome: string; warnings: string[] }> {
  const saved = process.env.SWITCHYARD_PLUGIN_PICK_TIMEOUT_MS;
  if (env === undefined) delete process.env.SWITCHYARD_PLUGIN_PICK_TIMEOUT_MS;
  else process.env.SWITCHYARD_PLUGIN_PICK_TIMEOUT_MS = env;
  const warnings: string[] = [];
  const log = { warn: (m: string) => warnings.push(m), info() {}, error() {}, debug() {} };
  try {
    const loader = new PluginLoader({ builtins: BUILTIN_STRATEGIES, cacheDir: tempDir('switchyard-cage-cache-'), log: log as never });
    try {
      const path = write(join(tempDir(), 'slow.mjs'), SLOW);
      const instance = (await loader.loadFile(path)).plugin!.definition.create({}, context());
      const candidates = fleet(3);
      // The first pick also pays the worker's warm-up; the next one that finds the worker free is the one read.
      // A skipped pick still runs to its end in the worker (60 ms, longer on a loaded machine): a pick made
      // before then is refused as busy, which says nothing about the budget, so it is made again.
      const pickOnce = (): string => {
        try {
          const result = instance.pick(request(), candidates);
          return result && 'replica' in result ? String(result.replica) : 'pass';
        } catch (error) {
          return `skipped: ${(error as Error).message}`;
        }
      };
      pickOnce();
      let outcome = BUSY;
      for (let tries = 0; outcome.startsWith(BUSY) && tries < 40; tries++) {
        await new Promise((r) => setTimeout(r, 150));
        outcome = pickOnce();
      }
      return { outcome, warnings };
    } finally {
      await loader.close();
    }
  } finally {
    if (saved === undefined) delete process.env.SWITCHYARD_PLUGIN_PICK_TIMEOUT_MS;
    else process.env.SWITCHYARD_PLUGIN_PICK_TIMEOUT_MS = saved;
  }
}

test('a 60 ms pick is skipped at the default budget and answers with SWITCHYARD_PLUGIN_PICK_TIMEOUT_MS=400', { timeout: 60_000 }, async () => {
  const byDefault = await pickWith(undefined);
  assert.match(byDefault.outcome, /^skipped: no answer within 20 ms/);
  const allowed = await pickWith('400');
  assert.equal(allowed.outcome, fleet(3)[1].id);
  assert.deepEqual(allowed.warnings, []);
});

test('a pick timeout that is not a whole number of ms below the stuck limit keeps 20 ms and is logged', { timeout: 60_000 }, async () => {
  for (const bad of ['20ms', '1000', '0', '-5', '1e3']) {
    const { outcome, warnings } = await pickWith(bad);
    assert.match(outcome, /^skipped: no answer within 20 ms/, bad);
    assert.equal(warnings.length, 1, bad);
    assert.match(warnings[0], /SWITCHYARD_PLUGIN_PICK_TIMEOUT_MS=.*plugins' picks wait 20 ms/);
  }
});
