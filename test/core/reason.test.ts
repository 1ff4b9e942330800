// cleanNote (the chain's cleaning of the texts strategies return again and
// again) answers what cleanReason answers, asked once or many times, while
// secrets are registered and forgotten in between: what it remembers of a
// text (short and printable) never goes stale.
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { cleanNote, cleanReason } from '../../core/decide/reason.ts';
import { addSecret, clearSecrets, removeSecret } from '../../core/observe/secrets.ts';
import { seededRandom } from '../../sdk/index.ts';

afterEach(clearSecrets);

const secret = 'tok-0123456789abcdef';
const texts = [
  'l8-general-3',
  'kv 0.51',
  'no adapter',
  `held by ${secret}`,
  secret,
  'line\nbreak',
  'tab\tand\u2028separator\u0085',
  'x'.repeat(199),
  'x'.repeat(200),
  'x'.repeat(201),
  `${'y'.repeat(195)}${secret}`,
  'é'.repeat(5000),
  '',
];

test('cleanNote answers as cleanReason, over texts asked again and again as secrets come and go', () => {
  const random = seededRandom(7);
  for (let round = 0; round < 2000; round++) {
    const r = random();
    if (r < 0.05) addSecret(secret);
    else if (r < 0.1) removeSecret(secret);
    const text = texts[Math.floor(random() * texts.length)];
    assert.equal(cleanNote(text), cleanReason(text), JSON.stringify(text));
  }
});

test('cleanNote of what is not a string answers as cleanReason', () => {
  for (const value of [undefined, null, 42, { toString: () => 'an object\u0000' }]) assert.equal(cleanNote(value), cleanReason(value));
});

test('a text cleanNote found clean is redacted once the secret it holds is registered', () => {
  const text = `owner ${secret}`;
  assert.equal(cleanNote(text), text);
  assert.equal(cleanNote(text), text);
  addSecret(secret);
  assert.equal(cleanNote(text), 'owner [redacted]');
  removeSecret(secret);
  assert.equal(cleanNote(text), text);
});

test('what cleanNote remembers is bounded: many distinct texts still answer right', () => {
  for (let i = 0; i < 10_000; i++) {
    const text = `note ${i}`;
    assert.equal(cleanNote(text), text);
  }
  addSecret('note 9999-secret');
  assert.equal(cleanNote('note 9999-secret here'), '[redacted] here');
});
