// The cage against the obviously right version: the same plugin loaded
// inline and caged gives the same answers to the same calls, hooks and
// clock included; the caged definition passes the conformance suite; state
// handed over on a reload survives the trip between two workers.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { PluginLoader } from '../../core/plugins/loader.ts';
import { assertConformance, context, fleet, request } from '../../sdk/testkit/index.ts';
import { seededRandom, type Candidate, type PickResult, type StrategyDefinition } from '../../sdk/index.ts';
import { cleanup, tempDir, write } from './fixtures.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';

after(cleanup);

const EXAMPLE = new URL('../../examples/plugins/least-kv.ts', import.meta.url).pathname;

// Reads prefix hashes (fetched from the router on demand), the seeded random
// source and the clock, in pick and in both hooks.
const PROBE = `
export default {
  name: 'probe', version: '1.0.0', sdk: '^1',
  create(_config, ctx) {
    const seen = [];
    return {
      pick(request, candidates) {
        if (request.id.endsWith('-pass')) return { pass: true, reason: 'asked to pass' };
        const h = request.prefixHashes;
        const i = Math.floor(ctx.random() * candidates.length);
        const c = candidates[(i + (h.length ? h[h.length - 1] : 0)) % candidates.length];
        return {
          replica: c.id,
          reason: 'h' + h.length + ' t' + ctx.now() + ' seen ' + seen.length + ' ' + (request.adapter ?? '-') + ' ' + (request.conversationId ?? '-') + ' ' + request.priority,
          alternatives: candidates.slice(0, 3).map((x) => ({ replica: x.id, score: x.signals.kvUsage + x.signals.inFlight, note: x.signals.loadedAdapters.join(',') + (x.saturated ? ' sat' : '') + (x.signals.stale ? ' stale' : '') })),
        };
      },
      onRouted(request, replica) { seen.push(replica + '@' + ctx.now() + ':' + request.prefixHashes.length); },
      onCompleted(request, replica, ok) { seen.push((ok ? 'ok ' : 'fail ') + replica); },
      exportState() { return { seen }; },
    };
  },
};
`;

async function both(path: string): Promise<{ inline: StrategyDefinition; caged: StrategyDefinition; loaders: PluginLoader[] }> {
  const inlineLoader = new PluginLoader({ builtins: BUILTIN_STRATEGIES, cacheDir: tempDir('switchyard-cage-cache-'), isolate: false });
  const cagedLoader = new PluginLoader({ builtins: BUILTIN_STRATEGIES, cacheDir: tempDir('switchyard-cage-cache-'), cage: { callTimeoutMs: 5000 } });
  const inline = (await inlineLoader.loadFile(path)).plugin!.definition;
  const caged = (await cagedLoader.loadFile(path)).plugin!.definition;
  return { inline, caged, loaders: [inlineLoader, cagedLoader] };
}

/** A varied workload: fleets of 1-12 replicas with changing signals, prompts, adapters, conversations, passes. */
function workload(steps: number): { request: ReturnType<typeof request>; candidates: Candidate[] }[] {
  const random = seededRandom('cage-workload');
  return Array.from({ length: steps }, (_, n) => {
    const size = 1 + Math.floor(random() * 12);
    const candidates = fleet(size, (i) => ({
      kvUsage: random(),
      queueDepth: Math.floor(random() * 40),
      inFlight: Math.floor(random() * 9),
      saturated: random() < 0.1,
      loadedAdapters: random() < 0.3 ? ['team-x', `a${i}`] : [],
      signals: { ageMs: random() < 0.05 ? Infinity : Math.floor(random() * 3000), stale: random() < 0.05 },
    }));
    const req = request({
      id: n % 17 === 0 ? `step-${n}-pass` : `step-${n}`,
      prompt: random() < 0.7 ? `system prompt ${n % 5} `.repeat(20) + `turn ${n}` : undefined,
      adapter: random() < 0.2 ? 'team-x' : undefined,
      conversationId: random() < 0.4 ? `conv-${n % 9}` : undefined,
      priority: random() < 0.2 ? 'batch' : 'interactive',
    });
    return { request: req, candidates };
  });
}

function replay(definition: StrategyDefinition, seedRandom: () => number, steps: ReturnType<typeof workload>): PickResult[] {
  const ctx = { ...context({ startMs: 5000 }), random: seedRandom };
  const instance = definition.create({ per_request_kv: 0.02, max_kv: 0.9 }, ctx);
  const answers: PickResult[] = [];
  steps.forEach((step, n) => {
    ctx.advance(7);
    const answer = instance.pick(step.request, step.candidates);
    answers.push(answer);
    const replica = answer && 'replica' in answer ? answer.replica : step.candidates[0].id;
    instance.onRouted?.(step.request, replica);
    if (n % 3 === 0) instance.onCompleted?.(step.request, replica, n % 2 === 0);
  });
  answers.push({ replica: '', reason: JSON.stringify(instance.exportState?.(), (_k, v) => (v instanceof Map ? [...v] : v)) });
  instance.dispose?.();
  return answers;
}

for (const [name, source] of [
  ['least-kv (the example plugin)', 'least-kv.ts'],
  ['a probe of every request field, hooks and the clock', 'probe.mjs'],
] as const) {
  test(`caged and inline give the same answers: ${name}`, async () => {
    const dir = tempDir();
    const path = source === 'least-kv.ts' ? join(dir, source) : write(join(dir, source), PROBE);
    if (source === 'least-kv.ts') copyFileSync(EXAMPLE, path);
    const { inline, caged, loaders } = await both(path);
    try {
      const steps = workload(400);
      // The cage seeds the worker's random source with one draw from the router's seeded source.
      const seed = Math.floor(seededRandom('s')() * 0x1_0000_0000);
      const expected = replay(inline, seededRandom(seed), steps);
      const actual = replay(caged, seededRandom('s'), steps);
      assert.deepEqual(actual, expected);
    } finally {
      await Promise.all(loaders.map((l) => l.close()));
    }
  });
}

test('the caged example plugin passes the conformance suite', async () => {
  const dir = tempDir();
  copyFileSync(EXAMPLE, join(dir, 'least-kv.ts'));
  const loader = new PluginLoader({ builtins: BUILTIN_STRATEGIES, cacheDir: tempDir('switchyard-cage-cache-'), cage: { callTimeoutMs: 5000 } });
  try {
    // The budget covers the round trip to the worker here, which the router does not hold against a plugin.
    assertConformance((await loader.loadFile(join(dir, 'least-kv.ts'))).plugin!.definition, { budgetMs: 50 });
  } finally {
    await loader.close();
  }
});

test('state handed over on a reload crosses from the old worker to the new one', async () => {
  const dir = tempDir();
  const path = write(join(dir, 'probe.mjs'), PROBE);
  const loader = new PluginLoader({ builtins: BUILTIN_STRATEGIES, cacheDir: tempDir('switchyard-cage-cache-'), cage: { callTimeoutMs: 5000 } });
  try {
    const first = (await loader.loadFile(path)).plugin!;
    const ctx = context();
    const old = first.definition.create({}, ctx);
    old.onRouted!(request(), 'r1');
    old.onCompleted!(request(), 'r1', true);
    write(path, `${PROBE}\n// a comment: a changed file, a new worker\n`);
    const second = (await loader.loadFile(path)).plugin!;
    assert.notEqual(second.cage, first.cage);
    const state = old.exportState!();
    const successor = second.definition.create({}, { ...ctx, previousState: state });
    assert.deepEqual(successor.exportState!(), { seen: [] }, 'the probe starts empty: it ignores previousState');
    assert.deepEqual(state, { seen: ['r1@1000000:0', 'ok r1'] }, 'hooks queued before exportState reached the old worker, in order');
    old.dispose!();
    assert.equal(first.cage!.state, 'stopped');
  } finally {
    await loader.close();
  }
});

test('twelve plugins starting at once all load: the workers set up side by side without tripping each other', async () => {
  const dir = tempDir('switchyard-cage-many-');
  const files = Array.from({ length: 12 }, (_, i) =>
    write(
      join(dir, `many-${i}.mjs`),
      `export default { name: 'many-${i}', version: '1.0.0', sdk: '^1', create() { return { pick: (_r, c) => ({ replica: c[0].id, reason: 'many ${i}' }) }; } };\n`,
    ),
  );
  const loader = new PluginLoader({ builtins: BUILTIN_STRATEGIES, cacheDir: tempDir('switchyard-cage-cache-'), cage: { callTimeoutMs: 5000 } });
  try {
    const loaded = await Promise.all(files.map((file) => loader.loadFile(file)));
    assert.deepEqual(
      loaded.flatMap((l) => l.problems.map((p) => p.message)),
      [],
    );
    assert.equal(loaded.filter((l) => l.plugin?.cage).length, 12);
  } finally {
    await loader.close();
  }
});
