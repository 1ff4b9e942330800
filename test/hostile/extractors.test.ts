// Every fact extractor runs in time linear in its input: adversarial inputs of
// 1 MB each finish within a generous bound (a backtracking regex takes
// seconds on 32 KB). The linear code scan answers exactly as the regular
// expression it replaced. And the bounds on what is kept: the decision log,
// the JSON pre-scan, the header checks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { contentsLookLikeCode, looksLikeCode, scanForCode } from '../../core/facts/code.ts';
import { contentText, renderMessages, renderPrompt } from '../../core/facts/prompt.ts';
import { requestFacts } from '../../core/facts/request-facts.ts';
import { charsPerTokenEstimator } from '../../core/facts/tokens.ts';
import { DecisionLog, MAX_STRING_CHARS } from '../../core/observe/decision-log.ts';
import { jsonComplexity } from '../../core/serve/json-body.ts';
import type { Decision } from '../../core/decide/decide.ts';
import { rejectedWith } from '../../core/decide/decision.ts';
import type { DecisionTrace } from '../../core/decide/trace.ts';
import type { Rejection } from '../../core/errors.ts';

const OLD_CODE_MARKS =
  /```|^\s*(def|class|import|from|function|fn|func|public|private|#include|package|const|let|var)\s+\S|;\s*$|\)\s*\{\s*$|=>\s*\{|^\s*(if|for|while)\s*\(.*\)\s*\{/m;

test('the linear code scan answers exactly as the regular expression it replaced', () => {
  const atoms = [
    ' ',
    '\n',
    '\t',
    '\r',
    '\u2028',
    '\u00a0',
    '\ufeff',
    ';',
    '{',
    '}',
    '(',
    ')',
    '=',
    '>',
    '=>',
    '`',
    '``',
    'def',
    'class',
    'if',
    'for',
    'while',
    'func',
    'function',
    'fn',
    '#include',
    'let',
    'x',
    'a b',
    '.',
  ];
  fc.assert(
    fc.property(fc.array(fc.constantFrom(...atoms), { maxLength: 16 }), (parts) => {
      const text = parts.join('');
      return scanForCode(text) === OLD_CODE_MARKS.test(text);
    }),
    { numRuns: 20_000, seed: 42 },
  );
  for (const text of ['def f(x):', 'if (a) {', 'x = 1;', 'foo() {\n', 'a => {', '```js', 'just prose.', 'function\n\nf', 'if (a)\n{']) {
    assert.equal(scanForCode(text), OLD_CODE_MARKS.test(text), JSON.stringify(text));
  }
});

const MB = 1 << 20;
const fill = (unit: string) => unit.repeat(Math.ceil(MB / unit.length)).slice(0, MB);
const ADVERSARIAL: Record<string, string> = {
  newlines: fill('\n'),
  spaces: fill(' '),
  'CR LF': fill('\r\n'),
  'unicode spaces': fill('\u2028\u00a0\u3000'),
  'newlines then a keyword': fill('\n').slice(0, MB - 3) + 'def',
  'semicolon, spaces': fill('; '),
  'paren, spaces': fill(') '),
  'paren, newlines': fill(')\n'),
  'arrows and spaces': fill('=> '),
  'if lines': fill('if (\n'),
  'one long if line': 'if (' + fill(')  x'),
  keywords: fill('def '),
  'keywords, newlines': fill('\ndef\n'),
  backticks: fill('``x'),
  emoji: fill('🦜'),
  'escaped quotes': fill('\\"'),
};
// Linear work over 1 MB takes milliseconds to a few hundred; the regex this replaced took
// seconds on 32 KB, and would take hours on 1 MB. Generous: CI counts line coverage (V8's
// block counters slow a tight loop about 1.5x), on a loaded machine 1 MB has taken 1.6 s.
const BOUND_MS = 4000;

function timed(name: string, run: () => unknown): void {
  const started = performance.now();
  run();
  const ms = performance.now() - started;
  assert.ok(ms < BOUND_MS, `${name}: ${Math.round(ms)} ms on 1 MB`);
}

test('every extractor is linear: 1 MB adversarial inputs each finish within a bound', () => {
  const estimator = charsPerTokenEstimator(4);
  for (const [label, text] of Object.entries(ADVERSARIAL)) {
    timed(`scanForCode(${label})`, () => scanForCode(text));
    timed(`looksLikeCode(${label})`, () => looksLikeCode(text));
    timed(`contentText(${label})`, () =>
      contentText([
        { type: 'text', text },
        { type: 'text', text },
      ]),
    );
    timed(`renderMessages(${label})`, () =>
      renderMessages([
        { role: 'user', content: text },
        { role: text.slice(0, 1000), content: [{ text }] },
      ]),
    );
    timed(`contentsLookLikeCode(${label})`, () => contentsLookLikeCode([text, text]));
    timed(`renderPrompt(${label})`, () => renderPrompt([text, text]));
    timed(`estimate(${label})`, () => estimator.estimate(text));
    timed(`jsonComplexity(${label})`, () => jsonComplexity(JSON.stringify({ a: text, b: [text] }), { maxDepth: 64, maxValues: 500_000 }));
    for (const endpoint of ['chat', 'completions', 'embeddings'] as const) {
      const body =
        endpoint === 'chat'
          ? { model: 'm', messages: [{ role: 'user', content: text }] }
          : endpoint === 'completions'
            ? { model: 'm', prompt: text }
            : { model: 'm', input: [text] };
      timed(`requestFacts(${endpoint}, ${label})`, () => {
        const facts = requestFacts({
          requestId: 'r',
          endpoint,
          headers: { authorization: `Bearer ${text.slice(0, 8000)}`, 'x-deadline-ms': text.slice(0, 8000), 'x-priority': text.slice(0, 8000) },
          body,
        });
        assert.ok('code' in facts, 'a bad header is rejected');
      });
      timed(`requestFacts(${endpoint}, ${label}, clean headers)`, () => requestFacts({ requestId: 'r', endpoint, headers: {}, body }));
    }
  }
  // Many parts rather than one long one.
  const manyMessages = Array.from({ length: 4096 }, () => ({ role: 'user', content: Array.from({ length: 64 }, () => ({ type: 'text', text: '\n;' })) }));
  timed('requestFacts(4096 messages of 64 parts)', () =>
    requestFacts({ requestId: 'r', endpoint: 'chat', headers: {}, body: { model: 'm', messages: manyMessages } }),
  );
  timed('renderPrompt(250k token ids)', () => renderPrompt(Array.from({ length: 250_000 }, () => 1)));
});

test('x-deadline-ms takes plain decimal integers from 1 to an hour, nothing else', () => {
  const facts = (value: string) =>
    requestFacts({ requestId: 'r', endpoint: 'completions', headers: { 'x-deadline-ms': value }, body: { model: 'm', prompt: 'p' } });
  for (const bad of ['0x10', ' 5 ', '1e20', '5.0', '-5', '0', '', '+5', 'Infinity', '3600001', '99999999999', '１２', '0b1', '5\n']) {
    const r = facts(bad);
    assert.ok('code' in r && r.code === 'invalid_request' && r.param === 'x-deadline-ms', JSON.stringify(bad));
  }
  for (const [good, ms] of [
    ['1', 1],
    ['250', 250],
    ['0250', 250],
    ['3600000', 3_600_000],
  ] as const) {
    const r = facts(good);
    assert.ok(!('code' in r) && r.deadlineMs === ms, good);
  }
  const longPriority = requestFacts({
    requestId: 'r',
    endpoint: 'completions',
    headers: { 'x-priority': 'p'.repeat(10_000) },
    body: { model: 'm', prompt: 'p' },
  });
  assert.ok('code' in longPriority && longPriority.message.length < 200, 'an echoed header is cut');
  const longConversation = requestFacts({
    requestId: 'r',
    endpoint: 'completions',
    headers: { 'x-conversation-id': 'c'.repeat(257) },
    body: { model: 'm', prompt: 'p' },
  });
  assert.ok('code' in longConversation && longConversation.param === 'x-conversation-id');
});

test('the JSON pre-scan counts depth and values outside strings only', () => {
  const bounds = { maxDepth: 4, maxValues: 10 };
  assert.equal(jsonComplexity('[[[[1]]]]', bounds), undefined);
  assert.match(jsonComplexity('[[[[[1]]]]]', bounds) ?? '', /deeper than 4/);
  assert.equal(jsonComplexity(JSON.stringify({ a: '[[[[[[[[[[,,,,,,,,,,,,,,,,"' }), bounds), undefined);
  assert.equal(jsonComplexity(JSON.stringify({ a: '\\"[[[[[[[[\\\\' }), bounds), undefined);
  assert.match(jsonComplexity('[1,2,3,4,5,6,7,8,9,10,11]', bounds) ?? '', /more than 10/);
  assert.equal(jsonComplexity('{"unterminated', bounds), undefined, 'malformed JSON is left to JSON.parse');
  const depthOf = (v: unknown): number => (typeof v === 'object' && v !== null ? 1 + Math.max(0, ...Object.values(v).map(depthOf)) : 0);
  fc.assert(
    fc.property(fc.jsonValue({ maxDepth: 8 }), fc.integer({ min: 1, max: 8 }), (value, maxDepth) => {
      const text = JSON.stringify(value);
      const tooDeep = /deeper/.test(jsonComplexity(text.padEnd(200, ' '), { maxDepth, maxValues: 1e9 }) ?? '');
      return tooDeep === depthOf(value) > maxDepth;
    }),
    { numRuns: 3000, seed: 7 },
  );
});

function fakeDecision(model: string): Decision {
  const rejection = { code: 'model_not_found', status: 404, type: 'not_found_error', message: `The model \`${model}\` does not exist.` } as const;
  return rejectedWith(rejection as unknown as Rejection, { requestId: 'req-1' }, {
    model: { decidedBy: 'model lookup', reason: `no model ${model}`, facts: { requestedModel: model } },
  } as unknown as DecisionTrace);
}

test('the decision log cuts long strings, keeps no hidden copy of them, and stays within its bytes', () => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const log = new DecisionLog({ capacity: 1000, maxBytes: 64 * 1024 });
  gc();
  const heapBefore = process.memoryUsage().heapUsed;
  for (let i = 0; i < 24; i++) log.add(fakeDecision(String.fromCharCode(65 + (i % 26)).repeat(7_500_000)));
  gc();
  const grown = process.memoryUsage().heapUsed - heapBefore;
  // 24 names of 7.5 MB: 180 MB if any copy (or a slice's parent) were kept.
  assert.ok(grown < 30 * 1024 * 1024, `heap grew ${Math.round(grown / 2 ** 20)} MB`);
  const usage = log.usage();
  assert.ok(usage.bytes <= 64 * 1024, `${usage.bytes} bytes`);
  assert.ok(usage.entries > 3 && usage.entries < 24, `${usage.entries} entries: the byte bound, not the count, evicted`);
  const [newest] = log.recent(1) as { reason: string; error: { message: string }; trace: { model: { facts: { requestedModel: string } } } }[];
  assert.ok(newest.reason.length < MAX_STRING_CHARS + 100 && newest.reason.includes('more characters'));
  assert.ok(newest.error.message.length < MAX_STRING_CHARS + 100);
  assert.ok(newest.trace.model.facts.requestedModel.length < MAX_STRING_CHARS + 100);
  // Short decisions pass untouched and the count bound still holds.
  const small = new DecisionLog({ capacity: 5 });
  for (let i = 0; i < 12; i++) small.add(fakeDecision(`m${i}`));
  assert.deepEqual(
    small.recent(10).map((d) => (d as { reason: string }).reason.match(/m\d+/)?.[0]),
    ['m11', 'm10', 'm9', 'm8', 'm7'],
  );
});
