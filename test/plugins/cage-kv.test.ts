// One plugin contract, caged or not: a caged plugin's create() gets a
// ctx.kvIndex whose lookups the router's index answers mid-call, and its
// requests carry promptTokenIds, as inline. The built-in precise-prefix (a
// KV-event strategy), loaded from a plugin directory and so caged, gives the
// same answers as inline over the same index; a probe of both lookups and the
// token ids sees exactly what the router's index and request hold.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PluginLoader } from '../../core/plugins/loader.ts';
import { candidate, context, kvIndex, request, resolveConfig, type TestKvHolding } from '../../sdk/testkit/index.ts';
import type { CachedPrefix, KvIndexView, PickResult, StrategyDefinition } from '../../sdk/index.ts';
import { cleanup, tempDir, write } from './fixtures.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';

after(cleanup);

async function load(source: string, name: string): Promise<{ inline: StrategyDefinition; caged: StrategyDefinition; loaders: PluginLoader[] }> {
  const dir = tempDir('switchyard-cage-kv-');
  const path = write(join(dir, `${name}.ts`), source);
  // Another name than the built-in's: a plugin may not take a built-in's name.
  const builtins = BUILTIN_STRATEGIES.filter((s) => s.name !== name);
  const inlineLoader = new PluginLoader({ builtins, cacheDir: tempDir('switchyard-cage-cache-'), isolate: false });
  const cagedLoader = new PluginLoader({ builtins, cacheDir: tempDir('switchyard-cage-cache-'), cage: { callTimeoutMs: 5000 } });
  const inline = (await inlineLoader.loadFile(path)).plugin!.definition;
  const caged = (await cagedLoader.loadFile(path)).plugin!.definition;
  assert.ok((await cagedLoader.loadFile(path)).plugin!.cage, 'loaded in a cage');
  return { inline, caged, loaders: [inlineLoader, cagedLoader] };
}

const system = 'You are a helpful assistant for the billing team. '.repeat(8);

test('precise-prefix, a KV-event strategy, picks the same caged as inline over the same KV index', async () => {
  const source = readFileSync(new URL('../../plugins/precise-prefix.ts', import.meta.url), 'utf8').replaceAll("'../sdk/index.ts'", "'@switchyard/sdk'");
  const { inline, caged, loaders } = await load(source, 'precise-prefix');
  try {
    const prompts = [system + 'My invoice is wrong. '.repeat(4), system + 'Where is my refund? '.repeat(6), 'Something else entirely. '.repeat(10), 'short'];
    const requests = prompts.map((prompt, i) => request({ id: `kv-${i}`, prompt }));
    const full = requests[0].prefixHashes;
    const now = 1_000_000;
    const holdings: Record<string, TestKvHolding> = {
      a: { hashes: full.slice(0, 6), lastEventAt: now },
      b: { hashes: full, lastEventAt: now - 100 },
      c: { hashes: requests[1].prefixHashes, lastEventAt: now - 60_000 },
    };
    const fleets = [
      [candidate({ id: 'a' }), candidate({ id: 'b', kvUsage: 0.5 }), candidate({ id: 'c' })],
      [candidate({ id: 'a', inFlight: 3 }), candidate({ id: 'b', kvUsage: 0.95 }), candidate({ id: 'c', inFlight: 1 })],
    ];
    const answers = (definition: StrategyDefinition): PickResult[] => {
      const ctx = { ...context({ startMs: now }), kvIndex: kvIndex(holdings, () => now) };
      const instance = definition.create(resolveConfig(definition, {}).config, ctx);
      const out: PickResult[] = [];
      for (const fleet of fleets) for (const r of requests) out.push(instance.pick(r, fleet));
      instance.dispose?.();
      return out;
    };
    const expected = answers(inline);
    assert.ok(
      expected.some((a) => a && 'replica' in a && /holds/.test(a.reason)),
      'inline picks by the index at least once',
    );
    assert.deepEqual(answers(caged), expected);
  } finally {
    for (const l of loaders) await l.close();
  }
});

const PROBE = `
export default {
  name: 'kv-probe', version: '1.0.0', sdk: '^1.3',
  create(_config, ctx) {
    const kv = ctx.kvIndex;
    const show = (list) => list.map((e) => e.replica + ':' + e.blocks + ':' + e.ageMs + ':' + (e.tokens ?? '-')).join(',');
    return {
      pick(request, candidates) {
        if (!kv) return { pass: true, reason: 'no kvIndex' };
        const ids = request.promptTokenIds;
        const byHashes = show(kv.longestPrefix(request.prefixHashes.slice(0, 3)));
        const byTokens = kv.longestPrefixOfTokens && ids ? show(kv.longestPrefixOfTokens(ids, request.adapter)) : 'none';
        return { replica: candidates[0].id, reason: (ids ? ids.length + '/' + ids[0] + '/' + ids[ids.length - 1] : 'no ids') + ' | ' + byHashes + ' | ' + byTokens };
      },
    };
  },
};
`;

test('a caged plugin sees ctx.kvIndex (both lookups) and promptTokenIds as an inline one does', async () => {
  const { inline, caged, loaders } = await load(PROBE, 'kv-probe');
  try {
    const seen: { hashes: number[]; ids: number[]; adapter?: string }[] = [];
    const index: KvIndexView = {
      longestPrefix(hashes): readonly CachedPrefix[] {
        seen.push({ hashes: [...hashes], ids: [] });
        return [
          { replica: 'a', blocks: hashes.length, ageMs: 12 },
          { replica: 'b', blocks: 0, ageMs: Infinity },
        ];
      },
      longestPrefixOfTokens(ids, adapter): readonly CachedPrefix[] {
        seen.push({ hashes: [], ids: Array.from(ids), adapter });
        return [{ replica: 'b', blocks: 2, ageMs: 5, tokens: 32 }];
      },
    };
    const tokenIds = Uint32Array.from({ length: 40_000 }, (_, i) => (i * 7919) % 128_000);
    const withIds = { ...request({ id: 'ids', prompt: system, adapter: 'team-x' }), promptTokenIds: tokenIds };
    const withoutIds = request({ id: 'no-ids', prompt: system });
    const run = (definition: StrategyDefinition) => {
      seen.length = 0;
      const instance = definition.create({}, { ...context(), kvIndex: index });
      const reasons = [withIds, withoutIds].map((r) => (instance.pick(r, [candidate({ id: 'a' }), candidate({ id: 'b' })]) as { reason: string }).reason);
      return { reasons, seen: seen.map((s) => ({ ...s })) };
    };
    const expected = run(inline);
    assert.equal(expected.reasons[0], `40000/0/${tokenIds[39_999]} | a:3:12:-,b:0:Infinity:- | b:2:5:32`);
    assert.equal(expected.reasons[1], 'no ids | a:3:12:-,b:0:Infinity:- | none');
    const got = run(caged);
    assert.deepEqual(got.reasons, expected.reasons);
    // The router's index was asked the same questions, token ids and adapter included.
    assert.deepEqual(got.seen, expected.seen);
    // Without an index in the router, the caged plugin gets none either.
    const bare = caged.create({}, context());
    assert.equal((bare.pick(withoutIds, [candidate({ id: 'a' })]) as { reason: string }).reason, 'no kvIndex');
  } finally {
    for (const l of loaders) await l.close();
  }
});
