// A chat prompt's estimate summed message by message, long messages
// remembered (core/facts/chat-estimate.ts), is the estimate of the rendered
// prompt read at once: over random conversations in every script the
// estimate knows, asked again and again (remembered shares added), with
// messages that start or end with line ends, and at two rates.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chatEstimate } from '../../core/facts/chat-estimate.ts';
import { renderChat } from '../../core/facts/prompt.ts';
import { requestFacts, type RequestFacts } from '../../core/facts/request-facts.ts';
import { characterClassEstimator, estimateTokens } from '../../core/tokens/estimate.ts';
import { seededRandom } from '../../sdk/index.ts';

const pieces = [
  'The quick brown fox jumps over the lazy dog. ',
  'internationalization ',
  'function add(a, b) {\n  return a + b;\n}\n',
  '    indented();\n',
  '12345 67.89 ',
  '{"key": [1, 2, 3]}',
  '中文的句子，',
  'ひらがなカタカナ',
  '한국어 문장 ',
  'ภาษาไทย ',
  'Ελληνικά кириллица ',
  '😀🚀 ',
  '\n',
  '\r\n',
  '\n\n\n',
  '\t',
  '—…©× ',
  'é ß ñ ',
];

function randomText(random: () => number, pieceCount: number): string {
  let text = '';
  for (let i = 0; i < pieceCount; i++) text += pieces[Math.floor(random() * pieces.length)];
  return text;
}

test('over random conversations in every script, asked repeatedly: the same count as the rendered prompt read at once', () => {
  const random = seededRandom(5);
  for (const rate of [4, 3.3]) {
    const estimator = characterClassEstimator(rate);
    // A few long messages that recur (system prompts, earlier turns), some all Latin, some not.
    const recurring = Array.from({ length: 40 }, (_, i) => (i % 3 === 0 ? 'You are a helpful assistant. '.repeat(10 + i) : randomText(random, 10 + i * 3)));
    let checked = 0;
    for (let round = 0; round < 3000; round++) {
      const count = 1 + Math.floor(random() * 6);
      const messages = Array.from({ length: count }, () => {
        // Role headers' charges are remembered while whole: roles charged in fractions, and one too long to remember, too.
        const role = ['system', 'user', 'assistant', 'tool', '用户', 'ユーザー', 'r'.repeat(70)][Math.floor(random() * 7)];
        const content =
          random() < 0.5 ? recurring[Math.floor(random() * recurring.length)] : random() < 0.2 ? '' : randomText(random, 1 + Math.floor(random() * 30));
        // Content as parts sometimes: joined, the same text.
        return {
          role,
          content:
            random() < 0.2
              ? [
                  { type: 'text', text: content.slice(0, 7) },
                  { type: 'text', text: content.slice(7) },
                ]
              : content,
        };
      });
      const chat = renderChat(messages);
      assert.equal(chatEstimate(chat, estimator), estimateTokens(chat.text, rate), `rate ${rate}, round ${round}: ${JSON.stringify(chat.text.slice(0, 120))}`);
      checked++;
    }
    assert.equal(checked, 3000);
  }
});

test('request facts count a chat the same whether its long messages are remembered or not', () => {
  const system = 'You are a helpful assistant for ACME Corp. Answer briefly and cite sources. '.repeat(12);
  const facts = (question: string) =>
    requestFacts({
      requestId: 'r',
      endpoint: 'chat',
      headers: {},
      body: {
        model: 'm',
        messages: [
          { role: 'system', content: system },
          { role: 'user', content: question },
        ],
      },
    }) as RequestFacts;
  const first = facts('What is the capital of France?');
  const again = facts('What is the capital of France?');
  assert.equal(first.promptTokens, estimateTokens(first.promptText));
  assert.equal(again.promptTokens, first.promptTokens);
  // A different question on the same (remembered) system prompt still counts its own words.
  const longer = facts('What is the capital of France, and what is its population, and what is its history?');
  assert.equal(longer.promptTokens, estimateTokens(longer.promptText));
  assert.ok(longer.promptTokens > first.promptTokens);
});

test('a conversation in a script charged fractions of a token, turn after turn on a shared document: the same count as the rendered prompt read at once', () => {
  const random = seededRandom(11);
  const estimator = characterClassEstimator(4);
  // Its walks are remembered with the sum they start from: a document first, and the earlier turns after it, start from the same sums each turn.
  const documents = Array.from({ length: 3 }, (_, d) => '中文的句子，'.repeat(300 + d) + randomText(random, 40));
  for (let conversation = 0; conversation < 30; conversation++) {
    const messages: { role: string; content: string }[] = [{ role: 'system', content: documents[conversation % documents.length] }];
    for (let turn = 0; turn < 8; turn++) {
      messages.push({ role: turn % 2 === 0 ? 'user' : 'assistant', content: randomText(random, 5 + Math.floor(random() * 60)) });
      const chat = renderChat(messages);
      for (let again = 0; again < 2; again++) {
        assert.equal(chatEstimate(chat, estimator), estimateTokens(chat.text, 4), `conversation ${conversation}, turn ${turn}`);
      }
    }
  }
});
