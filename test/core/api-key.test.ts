// The API key's digest from its header (core/facts/api-key.ts): the sha256
// of the key as before, whether the header value was remembered or not,
// past the memo's bound and for values too long to remember.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { apiKeyHeaderHash, bearerKeyHash } from '../../core/facts/api-key.ts';
import { requestFacts, type RequestFacts } from '../../core/facts/request-facts.ts';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

test('an Authorization header gives the sha256 of its key, asked again and again, over more values than are remembered', () => {
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < 1500; i++) {
      const key = `sk-${i}-${'x'.repeat(i % 300)}`;
      const spacing = i % 3 === 0 ? ' ' : i % 3 === 1 ? '\t  ' : '   ';
      const value = `${i % 2 ? 'Bearer' : 'bearer'}${spacing}${key}${i % 5 === 0 ? '  ' : ''}`;
      assert.equal(bearerKeyHash(value), sha256(key), value);
    }
  }
});

test('a malformed Authorization header has no key, however often it is sent', () => {
  for (let round = 0; round < 3; round++) {
    for (const value of ['Basic abc', 'Bearer', 'Bearer ', 'Bearer a b', 'sk-demo', 'Bearer\u00a0', 'x'.repeat(400)]) {
      assert.equal(bearerKeyHash(value), undefined, value);
    }
  }
});

test('an x-api-key header gives the sha256 of its key without the whitespace around it, and not the Authorization digest of the same text', () => {
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < 1200; i++) {
      const key = `key-${i}`;
      const value = i % 2 ? ` ${key} ` : key;
      assert.equal(apiKeyHeaderHash(value), sha256(key));
    }
    // The same text in the two headers: each header's own answer.
    assert.equal(bearerKeyHash('Bearer shared'), sha256('shared'));
    assert.equal(apiKeyHeaderHash('Bearer shared'), sha256('Bearer shared'));
  }
});

test('request facts carry the key digest from either header, and refuse a malformed Authorization every time', () => {
  const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
  for (let round = 0; round < 3; round++) {
    const bearer = requestFacts({ requestId: 'r', endpoint: 'chat', headers: { authorization: 'Bearer sk-a' }, body }) as RequestFacts;
    assert.equal(bearer.apiKeyHash, sha256('sk-a'));
    const anthropic = requestFacts({ requestId: 'r', endpoint: 'chat', headers: { 'x-api-key': ' sk-b ' }, body }) as RequestFacts;
    assert.equal(anthropic.apiKeyHash, sha256('sk-b'));
    const malformed = requestFacts({ requestId: 'r', endpoint: 'chat', headers: { authorization: 'Token sk-a' }, body });
    assert.equal('status' in malformed && malformed.status, 401);
  }
});
