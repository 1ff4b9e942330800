// The two-way memo of long messages (core/facts/message-slot.ts): equality
// decides, a prefix is remembered as a prefix, and two messages sharing a
// set both stay until a third takes the one used less lately.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MessageSlots, messageSlot } from '../../core/facts/message-slot.ts';

test('messageSlot of a prefix is the slot of the prefix as a string of its own', () => {
  const text = 'The quick brown fox jumps over the lazy dog, again and again. 漢字 😀';
  for (let chars = 1; chars <= text.length; chars++) assert.equal(messageSlot(text, chars), messageSlot(text.slice(0, chars)));
});

test('a set keeps two messages; a third takes the one found or taken less lately', () => {
  const slots = new MessageSlots(2); // one set: every message shares it
  const [a, b, c] = ['a'.repeat(200), 'b'.repeat(200), `${'a'.repeat(199)}c`];
  slots.values[slots.take(a)] = 1;
  slots.values[slots.take(b)] = 2;
  assert.equal(slots.values[slots.find(a)], 1);
  assert.equal(slots.values[slots.find(b)], 2);
  assert.equal(slots.find(c), -1);
  // b was found last: c takes a's entry.
  slots.values[slots.take(c)] = 3;
  assert.equal(slots.find(a), -1);
  assert.equal(slots.values[slots.find(b)], 2);
  assert.equal(slots.values[slots.find(c)], 3);
});

test('a prefix is found from any text that begins with it, and only from one', () => {
  const slots = new MessageSlots(16);
  const document = 'word '.repeat(10_000);
  slots.values[slots.take(`${document}first question`, document.length)] = 7;
  assert.equal(slots.values[slots.find(`${document}another question`, document.length)], 7);
  assert.equal(slots.values[slots.find(document)], 7);
  assert.equal(slots.find(`${document.slice(0, -1)}x tail`, document.length), -1);
  // A string the same length, the same three characters the set is named by, different elsewhere: not found.
  const changed = `${document.slice(0, 100)}X${document.slice(101)}`;
  assert.equal(slots.find(changed), -1);
});

test('a set of four keeps four messages; a fifth takes the one found or taken least lately', () => {
  const slots = new MessageSlots(4, 4); // one set of four
  const texts = ['a', 'b', 'c', 'd', 'e'].map((c) => c.repeat(300));
  for (const [i, text] of texts.slice(0, 4).entries()) slots.values[slots.take(text)] = i;
  // Found in turn, all four stay; a was found longest ago after b, c, d are found again.
  for (const [i, text] of texts.slice(0, 4).entries()) assert.equal(slots.values[slots.find(text)], i);
  for (const text of texts.slice(1, 4)) slots.find(text);
  slots.values[slots.take(texts[4])] = 4;
  assert.equal(slots.find(texts[0]), -1);
  for (const [i, text] of texts.entries()) if (i > 0) assert.equal(slots.values[slots.find(text)], i);
});
