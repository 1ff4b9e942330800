/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
// The explorer's Shadow tab (Debian's chromium, puppeteer-core, a real router
// with a shadow policy that sends long prompts to another pool): the counts
// by step and the differing decisions side by side, at 1400 and 420 px; and,
// with no shadow policy set, how to set one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import puppeteer, { type Page } from 'puppeteer-core';
import { Shadow } from '../../core/shadow/shadow.ts';
import { fixedPolicy } from '../../core/serve/fixed-policy.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';
import { policyFrom } from '../helpers/core.ts';
import { json, startTestRouter, until } from '../helpers/router.ts';
import { livePolicyFiles, longPromptPolicyFiles, promptOf, writePolicyDir } from '../shadow/policies.ts';

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((path) => existsSync(path));
const launch = () =>
  puppeteer.launch({ executablePath: CHROMIUM!, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'] });

/** Cells of every row of `selector` cut off or squeezed, and whether the page scrolls sideways. */
const layout = (page: Page, selector: string) =>
  page.$eval(selector, (tableElement) => {
    const hidden = [...(tableElement as HTMLTableElement).tBodies[0].rows].flatMap((row) =>
      [...row.cells]
        .filter((td) => {
          const box = td.getBoundingClientRect();
          return box.width < 24 || box.left < 0 || box.right > window.innerWidth + 1;
        })
        .map((td) => td.getAttribute('data-label') ?? '?'),
    );
    return { hidden, sideways: document.documentElement.scrollWidth > window.innerWidth + 1 };
  });

/** The layout once the page has settled: a slow browser on a loaded machine may measure a table mid-render. */
async function settledLayout(page: Page, selector: string) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const measured = await layout(page, selector);
    if ((measured.hidden.length === 0 && !measured.sideways) || Date.now() > deadline) return measured;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

test('the Shadow tab: counts by step and the differing decisions side by side, at 1400 and 420 px', { timeout: 120_000 }, async (t) => {
  assert.ok(CHROMIUM, 'chromium is not installed: scripts/install-test-tools.sh installs it');
  const shadow = new Shadow({ builtins: BUILTIN_STRATEGIES, watch: false, sampling: { maxBusyMsPerSecond: Infinity } });
  assert.equal((await shadow.set(writePolicyDir(longPromptPolicyFiles(), 'shadow'))).result, 'live');
  const router = await startTestRouter({}, { policy: fixedPolicy(policyFrom(livePolicyFiles())), shadow });
  const browser = await launch();
  t.after(async () => {
    await browser.close();
    await router.close();
    await shadow.close();
  });
  const long = ['shadow-1', 'shadow-4'];
  for (let i = 0; i < 6; i++) {
    const id = `shadow-${i}`;
    const response = await fetch(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': id, 'x-conversation-id': `c-${i}` },
      body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: long.includes(id) ? promptOf(300) : 'short question' }], max_tokens: 4 }),
    });
    assert.equal(response.status, 200);
    await response.arrayBuffer();
  }
  await until(async () => (await json(await fetch(`${router.adminUrl}/admin/shadow`))).totals.shadowed === 6, 10_000, 'every request shadowed');

  for (const width of [1400, 420]) {
    const page = await browser.newPage();
    await page.setViewport({ width, height: 900 });
    await page.goto(`${router.adminUrl}/admin/explorer`);
    await page.click('#tab-shadow');
    await page.waitForFunction(() => document.querySelectorAll('#shadow-decisions tbody tr:not(.none)').length === 2, { timeout: 20_000 });
    // One evaluate, not $$eval (a query, then a second round trip to read): the tab redraws every
    // 2 s, and a row it replaced in between is detached, whose innerText loses its line breaks.
    const rows = await page.evaluate(() =>
      [...document.querySelectorAll<HTMLTableRowElement>('#shadow-decisions tbody tr')].map((tr) => ({
        id: (tr.cells[1] as HTMLElement).innerText,
        at: (tr.cells[2] as HTMLElement).innerText,
        text: (tr.cells[3] as HTMLElement).innerText,
      })),
    );
    assert.deepEqual(
      rows.map((r) => r.id),
      [...long].reverse(),
      'newest first, exactly the long prompts',
    );
    for (const r of rows) {
      assert.equal(r.at, 'pool');
      assert.match(r.text, /^live: general \/ g\d by [^\n]+;\nshadow: long \/ l\d by [^\n]*long prompts/, r.text);
    }
    const steps = await page.evaluate(() =>
      [...document.querySelectorAll<HTMLTableRowElement>('#shadow-steps tbody tr')].map((tr) => [...tr.cells].map((td) => td.innerText)),
    );
    assert.deepEqual(
      steps,
      [
        ['model', '0', '0'],
        ['pool', '2', '2'],
        ['replica', '0', '0'],
        ['admission', '0', '0'],
      ],
      `by step at ${width} px`,
    );
    assert.match(await page.$eval('#shadow-summary', (n) => (n as HTMLElement).innerText), /6 shadowed: 4 same, 2 differ, 0 failed/);
    assert.deepEqual(await settledLayout(page, '#shadow-decisions'), { hidden: [], sideways: false }, `Shadow decisions at ${width} px`);
    assert.deepEqual(await settledLayout(page, '#shadow-top'), { hidden: [], sideways: false }, `Shadow differences at ${width} px`);
    await page.close();
  }
});

test('the Shadow tab with no shadow policy set says how to set one', { timeout: 60_000 }, async (t) => {
  assert.ok(CHROMIUM, 'chromium is not installed: scripts/install-test-tools.sh installs it');
  const shadow = new Shadow({ builtins: BUILTIN_STRATEGIES, watch: false });
  const router = await startTestRouter({}, { policy: fixedPolicy(policyFrom(livePolicyFiles())), shadow });
  const browser = await launch();
  t.after(async () => {
    await browser.close();
    await router.close();
    await shadow.close();
  });
  const page = await browser.newPage();
  await page.setViewport({ width: 420, height: 900 });
  await page.goto(`${router.adminUrl}/admin/explorer`);
  await page.click('#tab-shadow');
  await page.waitForSelector('#shadow-off', { timeout: 20_000 });
  const text = await page.$eval('#shadow-off', (n) => n.textContent ?? '');
  assert.match(text, /No shadow policy is set/);
  assert.match(text, /--shadow DIR/);
  assert.match(text, /PUT \/admin\/shadow/);
});
