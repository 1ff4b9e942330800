// `serve` loads the policy's tokenizer folders as it starts, and /readyz says
// ready only once they have loaded: the first request a load balancer sends
// is counted in the engine's tokens, not estimated while the tokenizer loads.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { routingUrls, startChild, SWITCHYARD_BIN, waitUntil } from '../observe/process.ts';

const ROOT = new URL('../../', import.meta.url).pathname;

test('/readyz waits for the tokenizers, and the first request after it is counted by the tokenizer', { timeout: 120_000 }, async () => {
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
    assert.match(router.output(), /"msg":"tokenizers loaded"/, 'ready only after the tokenizer folder loaded');
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-small', messages: [{ role: 'user', content: 'What is the capital of France?' }], max_tokens: 4 }),
    });
    assert.equal(response.status, 200, await response.clone().text());
    await response.arrayBuffer();
    const metrics = await (await fetch(`${adminUrl}/metrics`)).text();
    const counted = (source: string) =>
      [...metrics.matchAll(new RegExp(`^switchyard_prompt_token_counts_total\\{([^}]*)source="${source}"[^}]*\\} (\\d+)$`, 'gm'))].reduce(
        (n, m) => n + Number(m[2]),
        0,
      );
    assert.equal(
      counted('tokenizer'),
      1,
      metrics
        .split('\n')
        .filter((l) => l.includes('prompt_token_counts'))
        .join('\n'),
    );
    assert.equal(counted('estimate'), 0, 'nothing went on with the estimate');
  } finally {
    await router.stop();
  }
});
