// The token estimate of a long prompt reads a bounded sample of it
// (core/facts/sampled-estimate.ts): whole up to ESTIMATE_FULL_CHARS, so short
// prompts count exactly as before; beyond, evenly spaced stripes, within a few
// percent of the whole-text estimate for every kind of text the estimate
// knows, and never more than a bounded number of characters read.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ESTIMATE_FULL_CHARS, sampledEstimate } from '../../core/facts/sampled-estimate.ts';
import { requestFacts, type RequestFacts } from '../../core/facts/request-facts.ts';
import { renderChat, renderMessages } from '../../core/facts/prompt.ts';
import { characterClassEstimator, estimateTokens } from '../../core/tokens/estimate.ts';
import type { TokenEstimator } from '../../core/facts/tokens.ts';
import { seededRandom } from '../../sdk/index.ts';

const sample = (file: string) => readFileSync(new URL(`../../bench/samples/${file}`, import.meta.url), 'utf8');
const KINDS: Record<string, string> = {
  prose: sample('english.txt'),
  chinese: sample('chinese.txt'),
  japanese: sample('japanese.txt'),
  korean: sample('korean.txt'),
  thai: sample('thai.txt'),
  code: sample('code.ts.txt'),
  json: sample('json.json.txt'),
};
const grow = (text: string, chars: number) => text.repeat(Math.ceil(chars / text.length)).slice(0, chars);
const estimator = characterClassEstimator(4);

/** An estimator that remembers how many characters it was asked to read. */
function reading(): TokenEstimator & { read: number } {
  const counting = { read: 0, estimate: (text: string) => ((counting.read += text.length), estimateTokens(text)) };
  return counting;
}

test('a prompt up to the full-read size is estimated whole: the same count as the estimator gives', () => {
  for (const [kind, text] of Object.entries(KINDS)) {
    for (const chars of [0, 1, 100, ESTIMATE_FULL_CHARS - 1, ESTIMATE_FULL_CHARS]) {
      const prompt = grow(text, chars);
      assert.equal(sampledEstimate(prompt, estimator), estimateTokens(prompt), `${kind}, ${chars} characters`);
    }
  }
});

test('a long prompt is estimated within 4 % of the whole-text estimate, reading a bounded sample', () => {
  const mixed = (chars: number) =>
    grow(KINDS.prose, chars * 0.5) + grow(KINDS.code, chars * 0.2) + grow(KINDS.chinese, chars * 0.1) + grow(KINDS.json, chars * 0.2);
  const shapes: Record<string, (chars: number) => string> = {
    ...Object.fromEntries(Object.entries(KINDS).map(([kind, text]) => [kind, (chars: number) => grow(text, chars)])),
    'a conversation of prose, code, Chinese and JSON': mixed,
    'one unbroken run of letters': (chars) => 'x'.repeat(chars),
  };
  for (const [shape, make] of Object.entries(shapes)) {
    for (const chars of [ESTIMATE_FULL_CHARS + 1, 16_384, 225_000, 1_000_000, 8_000_000]) {
      const prompt = make(chars);
      const counting = reading();
      const sampled = sampledEstimate(prompt, counting);
      const whole = estimateTokens(prompt);
      assert.ok(Math.abs(sampled - whole) <= whole * 0.04, `${shape}, ${chars} characters: ${sampled} against ${whole}`);
      // 32 stripes, each edge moved at most 32 characters to reach whitespace.
      assert.ok(counting.read <= ESTIMATE_FULL_CHARS + 32 * 32, `${shape}, ${chars} characters: read ${counting.read}`);
      assert.equal(sampledEstimate(prompt, estimator), sampled, 'the same text, the same count');
    }
  }
});

test("a long chat's facts count the prompt from the sample, and a malformed body is still refused", () => {
  const messages = [
    { role: 'system', content: grow(KINDS.prose, 150_000) },
    { role: 'user', content: grow(KINDS.code, 70_000) },
  ];
  const facts = requestFacts({ requestId: 'r', endpoint: 'chat', headers: {}, body: { model: 'm', messages } }) as RequestFacts;
  assert.equal(facts.promptTokens, sampledEstimate(renderMessages(messages), estimator));
  assert.equal(facts.promptTokensSource, 'estimate');
  assert.equal(facts.hasCode, true);
  const refused = requestFacts({ requestId: 'r', endpoint: 'chat', headers: {}, body: { model: 'm', messages: grow(KINDS.prose, 20_000) } });
  assert.ok('code' in refused && refused.code === 'invalid_request' && refused.status === 400, JSON.stringify(refused));
});

test('the character-class estimate walks the stripes where they lie: the same count as estimating them joined, for every kind of text and cut', () => {
  const joinedOnly: TokenEstimator = { estimate: (text) => estimator.estimate(text) }; // not the character-class estimator: given the stripes joined
  let checked = 0;
  for (const [kind, text] of Object.entries(KINDS)) {
    // Lengths that move every stripe's cut, texts with and without whitespace near the cuts.
    for (const chars of [8_193, 9_999, 16_384, 50_000, 220_000]) {
      for (const variant of [grow(text, chars), grow(text.replace(/\s/g, ''), chars), grow(`${text}\n\n`, chars)]) {
        assert.equal(sampledEstimate(variant, estimator), sampledEstimate(variant, joinedOnly), `${kind}, ${chars} chars`);
        checked++;
      }
    }
  }
  assert.equal(checked, Object.keys(KINDS).length * 15);
});

test('a long chat whose long messages recur (their running sums remembered) gets the count of its text sampled alone, asked again in any company', () => {
  const random = seededRandom(23);
  const texts = Object.values(KINDS);
  const latin = [KINDS.prose, KINDS.code, KINDS.json];
  // Recurring messages from 2,048 characters to past the summed length (32,768), most of them whole-charged (the sums are kept for those).
  const recurring = [2_048, 3_000, 9_999, 16_384, 32_768, 32_769, 100_000].flatMap((chars, i) => [
    grow(latin[i % latin.length], chars),
    grow(latin[(i + 1) % latin.length].slice(i * 7), chars - 1),
    grow(texts[i % texts.length], chars),
  ]);
  for (let round = 0; round < 400; round++) {
    const count = 1 + Math.floor(random() * 4);
    const messages = Array.from({ length: count }, () => ({
      role: ['system', 'user', 'assistant'][Math.floor(random() * 3)],
      content:
        random() < 0.7 ? recurring[Math.floor(random() * recurring.length)] : grow(texts[Math.floor(random() * texts.length)], Math.floor(random() * 5_000)),
    }));
    const chat = renderChat(messages);
    assert.equal(
      sampledEstimate(chat.text, estimator, chat),
      sampledEstimate(chat.text, estimator),
      `round ${round}: ${messages.map((m) => m.content.length).join(', ')}`,
    );
  }
});
