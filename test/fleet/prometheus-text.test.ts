import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { parsePrometheusText, parseSampleValue, type Sample } from '../../core/fleet/prometheus-text.ts';

const fixture = (name: string): string => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8');

function only(samples: Sample[], name: string, labels: Record<string, string> = {}): Sample {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  assert.equal(found.length, 1, `exactly one ${name} ${JSON.stringify(labels)}`);
  return found[0];
}

test('escaped label values come back unescaped: backslash, quote, newline', () => {
  const { samples } = parsePrometheusText(fixture('parser-edge.txt'));
  const esc = only(samples, 'esc_total');
  assert.deepEqual({ ...esc.labels }, { path: 'C:\\models\\llama', quote: 'say "hi"', nl: 'two\nlines' });
  assert.equal(esc.value, 3);
});

test('colon names, _total counters and their TYPE lines are read as written', () => {
  const { samples, types } = parsePrometheusText(fixture('vllm-v1-dp.txt'));
  const hits = only(samples, 'vllm:prefix_cache_hits_total', { engine: '1' });
  assert.equal(hits.value, 400000);
  assert.equal(hits.labels.model_name, 'meta-llama/Llama-3.1-8B-Instruct');
  assert.equal(types.get('vllm:prefix_cache_hits_total'), 'counter');
  assert.equal(types.get('vllm:num_requests_running'), 'gauge');
  assert.equal(only(samples, 'vllm:prefix_cache_queries_total', { engine: '0' }).value, 1.2e6);
});

test('histograms: every bucket with its le label, +Inf included, then _sum and _count', () => {
  const { samples, types } = parsePrometheusText(fixture('vllm-v1-dp.txt'));
  assert.equal(types.get('vllm:time_to_first_token_seconds'), 'histogram');
  const buckets = samples.filter((s) => s.name === 'vllm:time_to_first_token_seconds_bucket' && s.labels.engine === '0');
  assert.deepEqual(
    buckets.map((b) => b.labels.le),
    ['0.001', '0.005', '0.01', '0.02', '0.04', '0.06', '0.08', '0.1', '0.25', '0.5', '1.0', '2.5', '+Inf'],
  );
  assert.equal(buckets.at(-1)!.value, 6226);
  assert.equal(only(samples, 'vllm:time_to_first_token_seconds_sum', { engine: '0' }).value, 1496.2031412124634);
  assert.equal(only(samples, 'vllm:time_to_first_token_seconds_count', { engine: '1' }).value, 6058);
});

test('NaN, +Inf, -Inf, exponents and negative zero are values', () => {
  const { samples } = parsePrometheusText(fixture('parser-edge.txt'));
  assert.ok(Number.isNaN(only(samples, 'special', { kind: 'nan' }).value));
  assert.equal(only(samples, 'special', { kind: 'pos' }).value, Infinity);
  assert.equal(only(samples, 'special', { kind: 'neg' }).value, -Infinity);
  assert.equal(only(samples, 'special', { kind: 'exp' }).value, 6.02e23);
  assert.equal(only(samples, 'no_labels').value, 0.001);
  assert.ok(Object.is(only(samples, 'empty_braces').value, -0));
  const sglang = parsePrometheusText(fixture('sglang.txt')).samples;
  assert.ok(Number.isNaN(only(sglang, 'sglang:spec_accept_length').value));
});

test('timestamps are kept in milliseconds, and are optional', () => {
  const { samples } = parsePrometheusText(fixture('parser-edge.txt'));
  assert.equal(only(samples, 'spaced').timestampMs, 1747051860000);
  assert.equal(only(samples, 'stamped').timestampMs, -1700);
  assert.equal(only(samples, 'no_labels').timestampMs, undefined);
});

test('blanks and tabs between tokens, and a trailing comma in the label set, are allowed', () => {
  const { samples } = parsePrometheusText(fixture('parser-edge.txt'));
  assert.deepEqual({ ...only(samples, 'spaced').labels }, { a: '1', b: '2' });
  assert.equal(only(samples, 'spaced').value, 7.5);
  assert.deepEqual({ ...only(samples, 'tabbed').labels }, { x: 'y' });
  assert.equal(only(samples, 'tabbed').value, 42);
  assert.equal(only(samples, 'last_line_without_newline').value, 5);
});

test('garbage lines are skipped and counted; the rest of the page still counts', () => {
  const page = parsePrometheusText(fixture('parser-edge.txt'));
  // bad-name, unterminated, no_value, bad_value, hex_value, dup, missing_comma,
  // bad_timestamp, trailing_junk, a label set with no name, __proto__.
  assert.equal(page.skipped, 11);
  assert.equal(page.firstSkippedLine, 23);
  assert.equal(page.samples.length, 15);
  assert.equal(page.types.get('weird_type'), undefined, 'an unknown TYPE is ignored');
  for (const name of ['bad', 'unterminated', 'no_value', 'bad_value', 'hex_value', 'dup', 'proto']) {
    assert.ok(!page.samples.some((s) => s.name === name), `${name} is not a sample`);
  }
});

test('CRLF line endings read the same as LF', () => {
  const lf = parsePrometheusText(fixture('vllm-v1-dp.txt'));
  const crlf = parsePrometheusText(fixture('vllm-v1-dp.txt').replace(/\n/g, '\r\n'));
  assert.deepEqual(crlf, lf);
  assert.equal(crlf.skipped, 0);
});

test('never throws, whatever it is given', () => {
  for (const text of ['', '\n\n', '{', '}', '"', 'a{', 'a{b', 'a{b=', 'a{b="', 'a{b="\\', '# TYPE', '\u0000\uffff', 'x 1 2'.repeat(50)]) {
    const page = parsePrometheusText(text);
    assert.ok(page.skipped >= 0);
  }
  assert.deepEqual(parsePrometheusText('').samples, []);
});

test('keep reads only the series asked for, and does not judge the others', () => {
  const text = fixture('vllm-v1-dp.txt') + 'garbage line here\n';
  const page = parsePrometheusText(text, { keep: (name) => name === 'vllm:num_requests_running' });
  assert.deepEqual(
    page.samples.map((s) => s.value),
    [3, 5],
  );
  assert.equal(page.skipped, 0);
});

test('parseSampleValue takes what Prometheus writes and refuses the rest', () => {
  assert.equal(parseSampleValue('1.5e3'), 1500);
  assert.equal(parseSampleValue('.5'), 0.5);
  assert.equal(parseSampleValue('5.'), 5);
  assert.equal(parseSampleValue('-2'), -2);
  assert.equal(parseSampleValue('+Inf'), Infinity);
  assert.equal(parseSampleValue('inf'), Infinity);
  assert.ok(Number.isNaN(parseSampleValue('nan')!));
  for (const bad of ['', '0x10', '1e', 'e1', '--1', '1,5', 'Infinityx', ' 1']) {
    assert.equal(parseSampleValue(bad), undefined, JSON.stringify(bad));
  }
});

test('a 5,000-line page parses in a few milliseconds (it runs every second per replica)', () => {
  const lines: string[] = [];
  for (let i = 0; i < 5000; i++) {
    lines.push(`vllm:iteration_tokens_total_bucket{engine="${i % 8}",le="${i}",model_name="meta-llama/Llama-3.1-8B-Instruct"} ${i}.0`);
  }
  const text = lines.join('\n');
  assert.equal(parsePrometheusText(text).samples.length, 5000); // also warms up
  const rounds = 20;
  const started = performance.now();
  for (let i = 0; i < rounds; i++) parsePrometheusText(text);
  const perPage = (performance.now() - started) / rounds;
  // About 1.5 ms on an idle machine, 60 ms with eight suites fighting for the
  // CPUs: the bound only catches a pathological (say, quadratic) slowdown.
  assert.ok(perPage < 500, `${perPage.toFixed(2)} ms per page`);
});
