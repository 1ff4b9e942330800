// eventsEnd against the obvious version: the spec's line terminators read left to right.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { eventsEnd } from '../../core/serve/forward.ts';

/** The spec's reading, left to right: terminators (CRLF, LF, CR); a blank line is one that starts where the last one ended. */
function obvious(text: string): number {
  let previousEnd = -1;
  let result = 0;
  for (let p = 0; p < text.length; ) {
    const length = text.startsWith('\r\n', p) ? 2 : text[p] === '\r' || text[p] === '\n' ? 1 : 0;
    if (length === 0) {
      p++;
      continue;
    }
    if (p === previousEnd) result = p + length;
    previousEnd = p += length;
  }
  return result;
}

test('eventsEnd finds where the last whole SSE event ends', () => {
  assert.equal(eventsEnd(Buffer.from('data: {"a":1}\n\n')), 15);
  assert.equal(eventsEnd(Buffer.from('data: {"a":1}\n\ndata: {"b"')), 15);
  assert.equal(eventsEnd(Buffer.from('data: x\r\n\r\ndata')), 11);
  assert.equal(eventsEnd(Buffer.from('data: half')), 0);
  fc.assert(
    fc.property(fc.array(fc.constantFrom('a', ':', ' ', '\n', '\r', 'data: {}'), { maxLength: 40 }), (parts) => {
      const text = parts.join('');
      assert.equal(eventsEnd(Buffer.from(text)), obvious(text), JSON.stringify(text));
    }),
    { numRuns: 2000 },
  );
});
