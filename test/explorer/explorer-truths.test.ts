/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
// What the explorer says is true (Debian's chromium, puppeteer-core, a real
// router over a watched policy directory): the name a client sent finds its
// decisions; times are UTC and say so; the policy hash is the one logs and
// /admin/state give; after one refused file only that file is marked
// refused. Saves the screenshots docs/observability.md shows a copy of.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';
import { PolicyStore } from '../../core/decide/store.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';
import { OPEN_TENANTS, startTestRouter, tinyPool, TINY_MODELS } from '../helpers/router.ts';

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((path) => existsSync(path));
/** docs/observability.md shows copies of these two (docs/explorer-*.png). */
const SHOTS = new URL('../../.test-results/explorer/', import.meta.url).pathname;

test('the explorer: a decision found by the name the client sent, UTC times, the live hash, per-file refusal marks', { timeout: 120_000 }, async (t) => {
  assert.ok(CHROMIUM, 'chromium is not installed: scripts/install-test-tools.sh installs it');
  mkdirSync(SHOTS, { recursive: true });
  const dir = mkdtempSync(join(tmpdir(), 'sy-explorer-'));
  writeFileSync(join(dir, 'models.yaml'), `${TINY_MODELS}aliases:\n  - { name: chat-large, model: tiny }\n`);
  writeFileSync(join(dir, 'tenants.yaml'), OPEN_TENANTS);
  writeFileSync(join(dir, 'pools.yaml'), tinyPool({ replicas: 3 }));
  writeFileSync(join(dir, 'settings.yaml'), 'kind: settings\ndecision_headers: full\n');
  const store = await PolicyStore.open({ dir, seed: 1, builtins: BUILTIN_STRATEGIES });
  const router = await startTestRouter({}, { policy: store });
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
  });
  t.after(async () => {
    await browser.close();
    await router.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 900 });
  await page.goto(`${router.adminUrl}/admin/explorer`);
  await page.waitForFunction(() => document.getElementById('stream-status')?.textContent === 'live', { timeout: 20_000 });

  for (let i = 0; i < 6; i++) {
    const model = i % 2 ? 'chat-large' : 'tiny';
    const response = await fetch(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': `truth-${i}`, 'x-conversation-id': `conv-${i % 3}` },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }),
    });
    assert.equal(response.status, 200);
    await response.arrayBuffer();
  }
  await page.waitForFunction(() => document.querySelectorAll('#decisions tbody tr').length >= 6, { timeout: 20_000 });
  await page.type('#filter-model', 'chat-large');
  const found = await page.$$eval('#decisions tbody tr', (rows) => rows.map((r) => (r as HTMLElement).dataset.requestId));
  assert.deepEqual(found, ['truth-5', 'truth-3', 'truth-1'], 'the name the client sent finds its decisions');
  const time = await page.$eval('#decisions tbody tr td', (td) => (td as HTMLElement).innerText);
  assert.match(time, /^\d\d:\d\d:\d\d\.\d{3}Z$/, 'UTC, and it says so');
  await page.$eval('#filter-model', (input) => ((input as HTMLInputElement).value = ''));
  await page.$eval('#filter-model', (input) => input.dispatchEvent(new Event('input')));
  await page.screenshot({ path: join(SHOTS, 'explorer-decisions.png'), clip: { x: 0, y: 0, width: 1400, height: 640 } });

  await page.click('#tab-fleet');
  await page.waitForFunction(() => document.querySelectorAll('#fleet tbody tr').length === 3, { timeout: 10_000 });
  assert.match(await page.$eval('#fleet-updated', (n) => n.textContent ?? ''), /updated \d\d:\d\d:\d\dZ$/);
  // The screenshot shows the bars and a few samples of history.
  await page.waitForFunction(
    () => [...document.querySelectorAll('#fleet svg[data-spark="load"]')].filter((s) => Number((s as SVGElement).dataset.points) >= 4).length === 3,
    { timeout: 30_000 },
  );
  await page.screenshot({ path: join(SHOTS, 'explorer-fleet.png'), clip: { x: 0, y: 0, width: 1400, height: 420 } });

  // One file broken on disk: it, and only it, is marked refused; the hash is the live one.
  writeFileSync(join(dir, 'tenants.yaml'), 'kind: tenants\ntenants: [ {\n');
  assert.equal((await store.reload('test')).result, 'refused');
  const state = (await (await fetch(`${router.adminUrl}/admin/state`)).json()) as { policy: { hash: string } };
  await page.click('#tab-policy');
  await page.waitForSelector('#policy-files tbody tr', { timeout: 10_000 });
  assert.match(await page.$eval('#policy-summary', (n) => (n as HTMLElement).innerText), new RegExp(`hash ${state.policy.hash}`));
  const rows = await page.$$eval('#policy-files tbody tr', (trs) => trs.map((tr) => (tr as HTMLElement).innerText));
  const refused = rows.filter((r) => /was refused/.test(r));
  assert.equal(refused.length, 1, rows.join('\n'));
  assert.match(refused[0], /tenants\.yaml/);
});

test('the explorer at 1400 and 420 px: no page scrolls sideways, and every column of a decision and of a replica is on screen', {
  timeout: 120_000,
}, async (t) => {
  assert.ok(CHROMIUM, 'chromium is not installed: scripts/install-test-tools.sh installs it');
  const router = await startTestRouter({ 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': tinyPool({ replicas: 3 }) });
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
  });
  t.after(async () => {
    await browser.close();
    await router.close();
  });
  for (let i = 0; i < 4; i++) {
    const response = await fetch(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': `layout-${i}` },
      body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: 2 }),
    });
    await response.arrayBuffer();
  }
  for (const width of [1400, 420]) {
    const page = await browser.newPage();
    await page.setViewport({ width, height: 900 });
    await page.goto(`${router.adminUrl}/admin/explorer`);
    await page.waitForFunction(() => document.querySelectorAll('#decisions tbody tr').length >= 4, { timeout: 20_000 });
    /** Cells of the first row of `selector` that are cut off or squeezed, and whether the page scrolls sideways. */
    const layout = (selector: string) =>
      page.$eval(selector, (tableElement) => {
        const row = (tableElement as HTMLTableElement).tBodies[0].rows[0];
        // A cell is cut off by the window or by the box that scrolls the table.
        const right = Math.min(window.innerWidth, tableElement.closest('.scroll')?.getBoundingClientRect().right ?? Infinity);
        const hidden = [...row.cells]
          .filter((td) => {
            const box = td.getBoundingClientRect();
            return box.width < 24 || box.left < 0 || box.right > right + 1;
          })
          .map((td, i) => td.getAttribute('data-label') ?? String(i));
        return { hidden, sideways: document.documentElement.scrollWidth > window.innerWidth + 1 };
      });
    assert.deepEqual(await layout('#decisions'), { hidden: [], sideways: false }, `Decisions at ${width} px`);
    await page.click('#tab-fleet');
    await page.waitForFunction(() => document.querySelectorAll('#fleet tbody tr').length === 3, { timeout: 10_000 });
    assert.deepEqual(await layout('#fleet'), { hidden: [], sideways: false }, `Fleet at ${width} px`);
    await page.click('#tab-policy');
    await page.waitForSelector('#policy-pools tbody tr', { timeout: 10_000 });
    assert.deepEqual(await layout('#policy-pools'), { hidden: [], sideways: false }, `Policy at ${width} px`);
    await page.screenshot({ path: join(SHOTS, `layout-${width}.png`), fullPage: true });
    await page.close();
  }
});
