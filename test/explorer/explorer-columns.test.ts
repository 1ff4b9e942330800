/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
// What the explorer shows of a request and a policy (Debian's chromium,
// puppeteer-core, a real router): each decision's endpoint, priority,
// conversation and stream; the adapters a replica holds while its engine is
// idle; a tenant's quotas in words, not "[object Object]"; at 1400 and 420 px.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import puppeteer from 'puppeteer-core';
import { startTestRouter, TINY_MODELS } from '../helpers/router.ts';

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((path) => existsSync(path));

const TENANTS = `kind: tenants
anonymous: anon
tenants:
  - id: anon
    tier: free
    api_key_sha256: [f3abf2a6cc4f00987743db5f544ba345b4899ae31f326d8ee9c4816de153c9e0]
    adapters:
      - { name: team-x, model: tiny }
    quotas:
      requests_per_minute: 600
      tokens_per_minute: 20000
      token_weights: { prompt: 1, cached_prompt: 0.1, completion: 4 }
      shadow: true
`;
const POOLS = `kind: pools
pools:
  - name: general
    model: tiny
    version: v1
    limits: { max_model_len: 1024 }
    strategies: [session-affinity, least-load]
    replicas:
      - { id: r0, url: "emulate://tiny", adapters: [team-x] }
      - { id: r1, url: "emulate://tiny" }
`;

test("the explorer shows endpoint, priority, conversation and stream of each decision, a replica's adapters and quotas in words, at 1400 and 420 px", {
  timeout: 120_000,
}, async (t) => {
  assert.ok(CHROMIUM, 'chromium is not installed: scripts/install-test-tools.sh installs it');
  const router = await startTestRouter({ 'models.yaml': TINY_MODELS, 'tenants.yaml': TENANTS, 'pools.yaml': POOLS });
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
  });
  t.after(async () => {
    await browser.close();
    await router.close();
  });
  const streamed = await fetch(`${router.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': 'col-stream', 'x-conversation-id': 'conv-7', 'x-priority': 'batch' },
    body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: 4, stream: true }),
  });
  assert.equal(streamed.status, 200);
  await streamed.arrayBuffer();
  const plain = await fetch(`${router.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': 'col-plain' },
    body: JSON.stringify({ model: 'tiny', prompt: 'hello', max_tokens: 4 }),
  });
  assert.equal(plain.status, 200);
  await plain.arrayBuffer();

  // Long ids, as clients and the router's own generator make them: they wrap, and push no column off.
  const longId = '7f9c2b4e-1d3a-4c5b-9e8f-0a1b2c3d4e5f';
  const longIds = await fetch(`${router.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': longId, 'x-conversation-id': 'support-ticket-2026-12-01-000123456789' },
    body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }),
  });
  assert.equal(longIds.status, 200);
  await longIds.arrayBuffer();

  for (const width of [1400, 420]) {
    const page = await browser.newPage();
    await page.setViewport({ width, height: 900 });
    await page.goto(`${router.adminUrl}/admin/explorer`);
    await page.waitForFunction(() => document.querySelectorAll('#decisions tbody tr').length >= 3, { timeout: 20_000 });
    const cells = (id: string) =>
      page.$eval(`#decisions tbody tr[data-request-id="${id}"]`, (tr) => {
        const out: Record<string, string> = {};
        const onScreen: string[] = [];
        // On screen: inside the window and the box that scrolls the table.
        const right = Math.min(window.innerWidth, tr.closest('.scroll')?.getBoundingClientRect().right ?? Infinity);
        for (const td of (tr as HTMLTableRowElement).cells) {
          const label = td.getAttribute('data-label') ?? '';
          out[label] = (td as HTMLElement).innerText;
          const box = td.getBoundingClientRect();
          if (box.width >= 24 && box.left >= 0 && box.right <= right + 1) onScreen.push(label);
        }
        return { out, onScreen, sideways: document.documentElement.scrollWidth > window.innerWidth + 1 };
      });
    const s = await cells('col-stream');
    assert.deepEqual(
      { endpoint: s.out.endpoint, priority: s.out.priority, conversation: s.out.conversation, stream: s.out.stream },
      { endpoint: 'chat', priority: '-1', conversation: 'conv-7', stream: 'yes' },
      `at ${width} px`,
    );
    for (const column of ['time', 'request id', 'tenant', 'endpoint', 'model', 'pool', 'replica', 'priority', 'conversation', 'stream', 'status', 'reason'])
      assert.ok(s.onScreen.includes(column), `${column} on screen at ${width} px`);
    assert.equal(s.sideways, false, `no sideways scroll at ${width} px`);
    const l = await cells(longId);
    assert.deepEqual(l.onScreen.length, 12, `every column of a decision with long ids on screen at ${width} px: ${l.onScreen.join(', ')}`);
    assert.equal(l.sideways, false);
    const p = await cells('col-plain');
    assert.deepEqual(
      { endpoint: p.out.endpoint, priority: p.out.priority, conversation: p.out.conversation, stream: p.out.stream },
      { endpoint: 'completions', priority: '0', conversation: '–', stream: 'no' },
    );

    await page.click('#tab-fleet');
    await page.waitForFunction(() => document.querySelectorAll('#fleet tbody tr').length === 2, { timeout: 10_000 });
    const adapters = await page.$$eval('#fleet tbody tr', (trs) =>
      trs.map((tr) => [(tr as HTMLTableRowElement).dataset.replica, ((tr as HTMLTableRowElement).cells[12] as HTMLElement).innerText]),
    );
    assert.deepEqual(
      adapters,
      [
        ['r0', 'team-x'],
        ['r1', '–'],
      ],
      `adapters at ${width} px`,
    );
    // KV usage, queue and in flight as bars on every row; each replica's load and hit rate as sparklines once the router has samples.
    await page.waitForFunction(
      () => document.querySelectorAll('#fleet svg[data-spark="load"]').length === 2 && document.querySelectorAll('#fleet svg[data-spark="hit"]').length === 2,
      { timeout: 30_000 },
    );
    const fleet = await page.evaluate(() => {
      const box = document.querySelector('#panel-fleet .scroll')!.getBoundingClientRect();
      const right = Math.min(box.right, window.innerWidth) + 1;
      const rows = [...document.querySelectorAll('#fleet tbody tr')].map((tr) => ({
        meters: [...tr.querySelectorAll('[data-meter]')].map((m) => (m as HTMLElement).dataset.meter),
        kvShare: Number((tr.querySelector('[data-meter="kv"]') as HTMLElement).dataset.share),
        kvBar:
          (tr.querySelector('[data-meter="kv"] .fill') as HTMLElement).getBoundingClientRect().width /
          (tr.querySelector('[data-meter="kv"] .track') as HTMLElement).getBoundingClientRect().width,
        points: Number((tr.querySelector('svg[data-spark="load"]') as SVGElement).dataset.points),
        cut: [...(tr as HTMLTableRowElement).cells]
          .filter((td) => {
            const r = td.getBoundingClientRect();
            return r.width < 1 || r.left < box.left - 1 || r.right > right;
          })
          .map((td) => td.dataset.label),
      }));
      return { rows, sideways: document.documentElement.scrollWidth > window.innerWidth + 1 };
    });
    for (const row of fleet.rows) {
      assert.deepEqual(row.meters, ['kv', 'queue', 'inflight'], `bars at ${width} px`);
      assert.ok(
        row.kvShare >= 0 && row.kvShare <= 1 && Math.abs(row.kvBar - row.kvShare) < 0.05,
        `the KV bar is as long as the usage at ${width} px: ${row.kvBar} vs ${row.kvShare}`,
      );
      assert.ok(row.points >= 2, `a load history at ${width} px`);
      assert.deepEqual(row.cut, [], `no fleet column cut off at ${width} px`);
    }
    assert.equal(fleet.sideways, false, `no sideways scroll on the Fleet tab at ${width} px`);

    await page.click('#tab-policy');
    await page.waitForSelector('#policy-tenants tbody tr', { timeout: 10_000 });
    const quotas = await page.$eval('#policy-tenants tbody tr td:last-child', (td) => (td as HTMLElement).innerText);
    assert.equal(quotas, '600 requests/min, 20000 tokens/min (prompt ×1, cached prompt ×0.1, completion ×4); shadow: counted, never refused');
    assert.doesNotMatch(await page.$eval('#policy-tenants', (n) => (n as HTMLElement).innerText), /\[object Object\]/);
    await page.close();
  }
});
