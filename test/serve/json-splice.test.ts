// The splice agrees with JSON.parse on any object, however it is spaced or
// escaped, and turns down what it cannot check (the router then serializes).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { spliceJson, topLevelMembers } from '../../core/serve/json-splice.ts';

const spaced = fc.tuple(fc.dictionary(fc.string(), fc.jsonValue(), { maxKeys: 8 }), fc.constantFrom(undefined, 0, 1, 2, '\t', ' \n'));

test('spliced bytes parse to the body with the edits made, for any object and spacing', () => {
  fc.assert(
    fc.property(spaced, fc.string(), fc.boolean(), ([object, space], model, merge) => {
      const text = JSON.stringify(object, null, space as string | number | undefined);
      const bytes = Buffer.from(text);
      const body = JSON.parse(text) as Record<string, unknown>;
      const mergeable =
        !Object.hasOwn(body, 'stream_options') ||
        body.stream_options === null ||
        (typeof body.stream_options === 'object' && !Array.isArray(body.stream_options));
      const out = spliceJson(bytes, body, { set: [['model', model]], merge: merge ? ['stream_options', 'include_usage', true] : undefined });
      if (merge && !mergeable) return assert.equal(out, undefined);
      assert.ok(out, text);
      const expected: Record<string, unknown> = { ...body, model };
      if (merge) expected.stream_options = { ...(body.stream_options as object | null), include_usage: true };
      assert.deepEqual(JSON.parse(out.toString('utf8')), expected);
    }),
    { numRuns: 400 },
  );
});

test('no edit sends the very bytes received', () => {
  const bytes = Buffer.from('{ "a" : [1, "}\\"{"] ,"b":{"c":null}}  ');
  assert.equal(spliceJson(bytes, JSON.parse(bytes.toString()), {}), bytes);
});

test('what is not one JSON object, or disagrees with the parsed body, is turned down', () => {
  for (const text of ['[1,2]', '"model"', '{"a":1', '{"a":1}}', '{"a" 1}', '{"a":"x}', '{"a":1,}', '', '{"a":1} x'])
    assert.equal(topLevelMembers(Buffer.from(text)), undefined, text);
  // The parsed body is not what these bytes say (another body's bytes): no splice.
  assert.equal(spliceJson(Buffer.from('{"model":"a","x":1}'), { model: 'b', x: 1 }, { set: [['model', 'c']] }), undefined);
  assert.equal(spliceJson(Buffer.from('{"model":"a"}'), { model: 'a', x: 1 }, { set: [['model', 'c']] }), undefined);
});
