// Policy files' strings are copied into V8's one-byte form where their
// characters allow (core/policy/one-byte.ts), so that names cut from a file
// with an arrow in a comment do not make every reason and log line two-byte.
// The values stay exactly what the parser read: Latin-1, characters past it,
// aliases (one object, maybe a cycle) and nesting deeper than a stack.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseDocument } from 'yaml';
import { oneByte, oneByteStrings } from '../../core/policy/one-byte.ts';
import { parsePolicyText } from '../../core/policy/source.ts';

const text = `# pools → replicas — a comment past Latin-1 makes the whole text two-byte
kind: pools
pools:
  - name: général
    model: "llama-3-8b-instruct"
    replicas:
      - &r { id: l8-general-0, url: "http://127.0.0.1:10000", note: "→ 东京" }
      - *r
    numbers: [1, 2.5, true, null, "3"]
`;

test('a policy file parses to the same values as the YAML parser gives', () => {
  const { source, problems } = parsePolicyText('pools.yaml', text);
  assert.deepEqual(problems, []);
  assert.deepEqual(source!.data, parseDocument(text).toJS());
  const pool = (source!.data as { pools: { name: string; replicas: { id: string; note: string }[] }[] }).pools[0];
  assert.equal(pool.name, 'général');
  assert.equal(pool.replicas[0].note, '→ 东京');
  assert.equal(pool.replicas[1], pool.replicas[0], 'an alias stays one object');
});

test('oneByte keeps every string equal to itself, one past Latin-1 untouched', () => {
  for (const s of ['', 'l8-general-0', 'é ÿ \u0000 \u00ff', 'arrow →', '😀', 'x'.repeat(100_000)]) assert.equal(oneByte(s), s);
  const past = 'model → pool';
  assert.equal(oneByte(past), past);
});

test('a cycle made by aliases and nesting 100,000 deep are walked without end or overflow', () => {
  const cyclic = parsePolicyText('x.yaml', 'a: &a [1, "x", *a]\n');
  assert.deepEqual(cyclic.problems, []);
  const a = (cyclic.source!.data as { a: unknown[] }).a;
  assert.equal(a[2], a);
  assert.equal(a[1], 'x');
  let deep: unknown = 'leaf';
  for (let i = 0; i < 100_000; i++) deep = [deep];
  let node = oneByteStrings(deep);
  for (let i = 0; i < 100_000; i++) node = (node as unknown[])[0];
  assert.equal(node, 'leaf');
});
