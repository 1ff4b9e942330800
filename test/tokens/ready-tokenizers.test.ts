// `serve` loads the policy's tokenizer folders as it starts, and /readyz says
// ready only once they have loaded: the first request a load balancer sends
// is counted in the engine's tokens, not estimated while the tokenizer loads.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { routingUrls, startChild, SWITCHYARD_BIN, waitUntil } from '../observe/process.ts';

const ROOT = new URL('../../', import.meta.url).pathname;

test('/readyz waits for the tokenizers, and the first request after it finds the tokenizer loaded', { timeout: 120_000 }, async () => {
  const router = startChild(
    process.execPath,
    [SWITCHYARD_BIN, 'serve', '--policies', 'policies', '--port', '0', '--admin-port', '0', '--emulator-speed', '20'],
    {
      cwd: ROOT,
      env: { NODE_OPTIONS: '' },
    },
  );
  try {
    const { url, adminUrl } = await routingUrls(router);
    await waitUntil('/readyz to say ready', async () => ((await fetch(`${url}/readyz`)).ok ? true : undefined), 90_000, router);
    // The log says so too (lines are written in batches, at most a second late).
    await waitUntil('the log to say the tokenizers loaded', async () => (/"msg":"tokenizers loaded"/.test(router.output()) ? true : undefined), 10_000, router);
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-small', messages: [{ role: 'user', content: 'What is the capital of France?' }], max_tokens: 4 }),
    });
    assert.equal(response.status, 200, await response.clone().text());
    await response.arrayBuffer();
    const metrics = await (await fetch(`${adminUrl}/metrics`)).text();
    const lines = metrics.split('\n').filter((l) => l.startsWith('switchyard_prompt_token_counts_total{'));
    const total = (match: RegExp) => lines.filter((l) => match.test(l)).reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
    assert.equal(total(/./), 1, lines.join('\n'));
    // Never `loading`: the tokenizer was there before the request. (On a busy machine a cold count may still
    // outrun the 20 ms budget and go on with the estimate as `timeout`; that is the budget, not the start.)
    assert.equal(total(/fallback="loading"/), 0, lines.join('\n'));
    assert.equal(total(/source="tokenizer"|fallback="timeout"/), 1, lines.join('\n'));
  } finally {
    await router.stop();
  }
});
