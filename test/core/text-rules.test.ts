// Conditions on the prompt's text: keywords and RE2 patterns agree with
// json-rules-engine running the same operators, match whole words in any
// case, and cost time linear in a bounded part of the prompt however hostile
// the prompt is.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileRuleSet, firstMatch, type RuleSpec } from '../../core/rules/compile.ts';
import { matchingRulesByEngine } from '../../core/rules/reference.ts';
import { compileTextTest, PROMPT_CHARS_EXAMINED } from '../../core/rules/text-match.ts';
import { seededRandom } from '../../sdk/index.ts';

const rule = (name: string, operator: string, value: unknown): RuleSpec => ({
  name,
  conditions: { all: [{ fact: 'prompt', operator, value }] },
  event: { type: 'x', params: { pool: name } },
});
const specs: RuleSpec[] = [
  rule('sql', 'containsAny', ['sql', 'select', 'inner join', 'c++', 'ß']),
  rule('drop', 'matches', '(?i)\\bdrop\\s+table\\b'),
  rule('no-digits', 'not:matches', '[0-9]'),
  rule('not-hello', 'not:containsAny', ['hello']),
];

test('keywords match whole words in any case; a keyword with a non-word edge needs no boundary there', () => {
  const sql = compileTextTest('containsAny', ['sql', 'select', 'inner join', 'c++']);
  for (const yes of ['SQL', 'please write a Select statement', 'an INNER JOIN b', 'in C++.', '(sql)', 'x c++y']) assert.equal(sql(yes), true, yes);
  for (const no of ['mysql', 'selection', 'selects', 'inner  join', 'innerjoin', '', 'c+']) assert.equal(sql(no), false, no);
  // Overlapping keywords: the automaton's fail links find the shorter one.
  const overlap = compileTextTest('containsAny', ['abcd', 'bc', 'c']);
  assert.equal(overlap('abce c'), true);
  assert.equal(overlap('abce'), false, '"bc" and "c" are inside a word here');
});

test('1,000 random prompts: compiled text conditions agree with json-rules-engine running the same operators', async () => {
  const words = ['sql', 'SELECT', 'selection', 'drop', 'table', 'Drop  Table', 'inner', 'join', 'c++', 'hello', '42', 'ß', 'mysql', '\n', '(', ')'];
  const random = seededRandom(11);
  const set = compileRuleSet(specs, 'pool');
  for (let n = 0; n < 1000; n++) {
    const prompt = Array.from({ length: Math.floor(random() * 12) }, () => words[Math.floor(random() * words.length)]).join(random() < 0.5 ? ' ' : '');
    const byEngine = await matchingRulesByEngine(specs, { prompt });
    const compiled = set.rules.filter((r) => r.test({ prompt })).map((r) => r.name);
    assert.deepEqual(compiled, byEngine, JSON.stringify(prompt));
    assert.equal(firstMatch(set, { prompt }).rule?.name, byEngine[0]);
  }
});

test('only the end of the prompt is examined: a keyword early in a long prompt does not count', () => {
  const sql = compileTextTest('containsAny', ['sql']);
  const filler = ' lorem'.repeat(PROMPT_CHARS_EXAMINED);
  assert.equal(sql(`sql${filler}`), false);
  assert.equal(sql(`${filler} sql`), true);
  const pattern = compileTextTest('matches', 'sql');
  assert.equal(pattern(`sql${filler}`), false);
  assert.equal(pattern(`${filler}sql`), true);
});

test('hostile 1 MB prompts: each text condition answers in bounded time', () => {
  const hostile = [
    '\n'.repeat(1 << 20),
    'a'.repeat(1 << 20),
    'ab'.repeat(1 << 19),
    `${'('.repeat(1 << 19)}${')'.repeat(1 << 19)}`,
    'select'.repeat(174_763),
    '\u{1F600}'.repeat(1 << 18),
  ];
  const tests = [
    compileTextTest(
      'containsAny',
      Array.from({ length: 256 }, (_, i) => `${'a'.repeat(100)}${i}`),
    ),
    compileTextTest('containsAny', ['aaaaaaaaaaaaaaaaaaab', 'abababababababac', 'sql']),
    compileTextTest('matches', '(a+)+b'),
    compileTextTest('matches', '(?i)(?:a|aa|aaa)*c'),
    compileTextTest('matches', '(x+x+)+y'),
  ];
  for (const input of hostile) {
    for (const check of tests) {
      const started = performance.now();
      check(input);
      const ms = performance.now() - started;
      // Generous: a shared, busy 2-core machine; a backtracking engine would take minutes.
      assert.ok(ms < 1000, `${ms.toFixed(0)} ms on a ${input.length}-character input`);
    }
  }
});

test('a few ASCII keywords (found with indexOf first) answer as whole words in ASCII case, whatever the text', () => {
  // The reference: a JavaScript regex without the u flag folds ASCII letters only, as the automaton does.
  const reference = (keywords: string[]) => {
    const escaped = keywords.map((k) => {
      const body = k.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      return `${/\w/.test(k[0]) ? '(?<![A-Za-z0-9_])' : ''}${body}${/\w/.test(k[k.length - 1]) ? '(?![A-Za-z0-9_])' : ''}`;
    });
    const pattern = new RegExp(escaped.join('|'), 'i');
    return (text: string) => pattern.test(text);
  };
  const keywordSets = [['sql', 'postgres', 'stack trace', 'regex', 'typescript', 'python'], ['c++', 'K8s'], ['ab', 'b', 'aba'], ['hello']];
  // Kelvin's K and the long s lower-case to ASCII; İ lower-cases into two characters; near-matches past the places bound.
  const atoms = [
    'sql',
    'SQL',
    'mysql',
    'Sql_',
    'postgres',
    'stack  trace',
    'Stack Trace',
    '\u212A8s',
    'k8s',
    'K8S',
    'c++',
    'c+',
    'ab',
    'aba',
    'bab',
    'İ',
    'ſql',
    'ß',
    ' ',
    '\n',
    '_',
    'hellox'.repeat(40),
    'x',
    'é',
  ];
  const random = seededRandom(5);
  for (const keywords of keywordSets) {
    const compiled = compileTextTest('containsAny', keywords);
    const expected = reference(keywords);
    for (let n = 0; n < 3000; n++) {
      const text = Array.from({ length: Math.floor(random() * 10) }, () => atoms[Math.floor(random() * atoms.length)]).join(random() < 0.5 ? ' ' : '');
      assert.equal(compiled(text), expected(text), `${JSON.stringify(keywords)} in ${JSON.stringify(text)}`);
    }
    assert.equal(compiled(`${'hellox '.repeat(100)}hello`), keywords.includes('hello'));
  }
});
