/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
// The decision explorer in a real headless browser (Debian's chromium driven
// by puppeteer-core) against a real router and emulated fleet: what a person
// sees when they watch decisions arrive, filter them, open one, look up a
// request id, and read the fleet, the policy and an explained request.
// Screenshots go to .test-results/explorer/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { OPEN_TENANTS, startTestRouter, tinyPool, TINY_MODELS, type TestRouter } from '../helpers/router.ts';

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((path) => existsSync(path));
const SHOTS = new URL('../../.test-results/explorer/', import.meta.url).pathname;

async function launch(): Promise<Browser> {
  assert.ok(CHROMIUM, 'chromium is not installed: .ci/run installs it (apt-get install -y chromium)');
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
  });
}

const shot = (page: Page, name: string) => page.screenshot({ path: `${SHOTS}${name}.png`, fullPage: true });
const texts = (page: Page, selector: string) => page.$$eval(selector, (nodes) => nodes.map((n) => (n as HTMLElement).innerText));

async function ask(t: TestRouter, requestId: string, model = 'tiny'): Promise<number> {
  const response = await fetch(`${t.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test', 'x-request-id': requestId, 'x-conversation-id': `c-${requestId}` },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }),
  });
  await response.arrayBuffer();
  return response.status;
}

test('the decision explorer shows live decisions, their four steps, the fleet, the policy and explained requests', { timeout: 120_000 }, async (t) => {
  mkdirSync(SHOTS, { recursive: true });
  const router = await startTestRouter({
    'models.yaml': TINY_MODELS,
    'tenants.yaml': OPEN_TENANTS,
    'pools.yaml': tinyPool({ strategies: '[session-affinity, power-of-two]' }),
  });
  const browser = await launch();
  t.after(async () => {
    await browser.close();
    await router.close();
  });
  const page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 900 });
  const pageErrors: string[] = [];
  page.on('pageerror', (error) => pageErrors.push(String(error)));
  await page.goto(`${router.adminUrl}/admin/explorer`);
  await page.waitForFunction(() => document.getElementById('stream-status')?.textContent === 'live', { timeout: 20_000 });

  // Decisions arrive live, newest first.
  assert.equal(await ask(router, 'explorer-ok-1'), 200);
  assert.equal(await ask(router, 'explorer-missing-1', 'no-such-model'), 404);
  assert.equal(await ask(router, 'explorer-ok-2'), 200);
  await page.waitForFunction(() => document.querySelectorAll('#decisions tbody tr').length >= 3, { timeout: 20_000 });
  const ids = await page.$$eval('#decisions tbody tr', (rows) => rows.map((r) => (r as HTMLElement).dataset.requestId));
  assert.deepEqual(ids.slice(0, 3), ['explorer-ok-2', 'explorer-missing-1', 'explorer-ok-1']);
  await shot(page, '1-decisions');

  // Filter by status: only the rejection stays.
  await page.select('#filter-status', 'rejected');
  const rejected = await page.$$eval('#decisions tbody tr', (rows) => rows.map((r) => (r as HTMLElement).dataset.requestId));
  assert.deepEqual(rejected, ['explorer-missing-1']);
  await page.select('#filter-status', '');
  await page.type('#filter-replica', 'r');
  assert.ok(
    !(await page.$$eval('#decisions tbody tr', (rows) => rows.map((r) => (r as HTMLElement).dataset.requestId))).includes('explorer-missing-1'),
    'a rejection has no replica',
  );
  await page.$eval('#filter-replica', (input) => ((input as HTMLInputElement).value = ''));
  await page.$eval('#filter-replica', (input) => input.dispatchEvent(new Event('input')));

  // One decision opened: the four steps, who decided each, and the alternatives.
  await page.click('#decisions tbody tr[data-request-id="explorer-ok-1"]');
  const steps = await page.$$eval('#detail .step', (nodes) => nodes.map((n) => (n as HTMLElement).dataset.step));
  assert.deepEqual(steps, ['tenant', 'model', 'pool', 'replica', 'admit']);
  const detail = await page.$eval('#detail', (n) => (n as HTMLElement).innerText);
  assert.match(detail, /Admitted: tiny@v1 · pool general · replica r\d/);
  assert.match(detail, /decided by (session-affinity|power-of-two)/);
  // The page shows every alternative the trace weighed, as /admin/decisions has them.
  const logged = (await (await fetch(`${router.adminUrl}/admin/decisions?limit=10`)).json()) as {
    decisions: { requestId: string; trace: Record<string, { alternatives?: unknown[] }> }[];
  };
  const trace = logged.decisions.find((d) => d.requestId === 'explorer-ok-1')!.trace;
  for (const step of ['model', 'pool', 'replica']) {
    const shown = (await page.$$(`#detail [data-step="${step}"] table.alternatives tbody tr`)).length;
    assert.equal(shown, trace[step]?.alternatives?.length ?? 0, `${step} alternatives`);
  }
  await shot(page, '2-decision-detail');

  // The rejection explains itself too.
  await page.click('#decisions tbody tr[data-request-id="explorer-missing-1"]');
  assert.match(await page.$eval('#detail', (n) => (n as HTMLElement).innerText), /Rejected 404 model_not_found/);

  // Search by request id.
  await page.type('#search-id', 'explorer-ok-2');
  await page.click('#search-button');
  await page.waitForFunction(() => document.querySelector('#detail .muted')?.textContent?.includes('explorer-ok-2'), { timeout: 5000 });
  await page.$eval('#search-id', (input) => ((input as HTMLInputElement).value = 'no-such-request'));
  await page.click('#search-button');
  await page.waitForSelector('#detail .error-box', { timeout: 5000 });
  assert.match(await page.$eval('#detail .error-box', (n) => n.textContent ?? ''), /No decision with request id "no-such-request"/);

  // The fleet view: every replica with its health and signals, updating live.
  await page.click('#tab-fleet');
  await page.waitForFunction(() => document.querySelectorAll('#fleet tbody tr').length === 3, { timeout: 10_000 });
  await page.waitForFunction(() => [...document.querySelectorAll('#fleet tbody tr')].every((r) => r.textContent?.includes('ready')), { timeout: 10_000 });
  const fleetRows = await texts(page, '#fleet tbody tr');
  // Each row's first cell, read as text: innerText's tabs between cells depend on the tab having been laid out.
  const fleetIds = await page.$$eval('#fleet tbody tr', (rows) => rows.map((r) => (r as HTMLTableRowElement).cells[0]?.textContent?.trim()));
  assert.deepEqual(fleetIds, ['r0', 'r1', 'r2']);
  assert.ok(
    fleetRows.every((r) => /\d+(\.\d)?%/.test(r)),
    'KV usage is shown once scraped',
  );
  await shot(page, '3-fleet');

  // The live policy.
  await page.click('#tab-policy');
  await page.waitForSelector('#policy-pools tbody tr', { timeout: 10_000 });
  assert.match(await page.$eval('#policy-summary', (n) => (n as HTMLElement).innerText), /Policy generation \d+/);
  assert.deepEqual(await texts(page, '#policy-models tbody tr td:first-child'), ['tiny']);
  assert.match((await texts(page, '#policy-pools tbody tr'))[0], /session-affinity → power-of-two/);
  assert.match((await texts(page, '#policy-tenants tbody tr'))[0], /anon \(anonymous\)/);
  await shot(page, '4-policy');

  // Explain: a pasted request, then malformed input that gets a clear error on the page.
  await page.click('#tab-explain');
  await page.$eval('#explain-body', (n) => ((n as HTMLTextAreaElement).value = JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }] })));
  await page.$eval('#explain-headers', (n) => ((n as HTMLTextAreaElement).value = 'Authorization: Bearer sk-test\nx-conversation-id: c-explain'));
  await page.click('#explain-run');
  await page.waitForFunction(() => document.querySelectorAll('#explain-result .step').length === 5, { timeout: 5000 });
  assert.match(await page.$eval('#explain-result', (n) => (n as HTMLElement).innerText), /Admitted: tiny@v1 · pool general/);
  await shot(page, '5-explain');
  await page.$eval('#explain-body', (n) => ((n as HTMLTextAreaElement).value = '{"model": "tiny", "messages": ['));
  await page.click('#explain-run');
  assert.match(await page.$eval('#explain-error', (n) => (n as HTMLElement).innerText), /not valid JSON/);
  await page.$eval('#explain-body', (n) => ((n as HTMLTextAreaElement).value = '[1, 2, 3]'));
  await page.click('#explain-run');
  await page.waitForFunction(() => document.getElementById('explain-error')?.innerText.includes('refused'), { timeout: 5000 });
  assert.match(await page.$eval('#explain-error', (n) => (n as HTMLElement).innerText), /400: "body" must be an OpenAI request body/);
  await shot(page, '6-explain-error');

  assert.deepEqual(pageErrors, [], 'no script error on the page');
});

test('explorer endpoints refuse malformed input with OpenAI-shaped 400s, never a 500', { timeout: 60_000 }, async (t) => {
  const router = await startTestRouter({ 'models.yaml': TINY_MODELS, 'tenants.yaml': OPEN_TENANTS, 'pools.yaml': tinyPool() });
  t.after(() => router.close());
  const post = (body: string, type = 'application/json') =>
    fetch(`${router.adminUrl}/admin/explain`, { method: 'POST', headers: { 'content-type': type }, body });
  for (const body of [
    'null',
    '[]',
    '"text"',
    '{"body": 5}',
    '{"body": {"model": "tiny"}, "headers": {"x": 5}}',
    '{"body": {"model":"tiny"}, "headers": []}',
    '{"body": {"model":"tiny"}, "endpoint": "images"}',
  ]) {
    const response = await post(body);
    assert.equal(response.status, 400, body);
    const json = (await response.json()) as { error: { type: string; code: string; message: string } };
    assert.equal(json.error.type, 'invalid_request_error', body);
  }
  // A body explain's own checks reject is a decision (a 400 rejection), not an error of the route.
  const bad = (await (await post('{"body": {"model": 7, "messages": "x"}}')).json()) as { status: number; error: { code: string } };
  assert.equal(bad.status, 400);
  assert.equal(bad.error.code, 'invalid_request');
  // The page is served; the stream answers as an event stream.
  const page = await fetch(`${router.adminUrl}/admin/explorer`);
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type') ?? '', /text\/html/);
  assert.match(page.headers.get('content-security-policy') ?? '', /default-src 'none'/);
  const controller = new AbortController();
  const stream = await fetch(`${router.adminUrl}/admin/decisions/stream`, { signal: controller.signal });
  assert.equal(stream.headers.get('content-type'), 'text/event-stream');
  controller.abort();
});
