// The dashboard's traffic in a real browser (Debian's Chromium): a site's overview opens on charts of
// the last 24 hours whose numbers are the API's, the range buttons switch to another step, the sites
// list shows every site's traffic at a glance, and nothing is loaded from another host.
import test from 'ava';
import type { Browser, Page } from 'playwright-core';
import { type TestBerth, createSite, json, putFile, startTestBerth } from '../helpers/berth.ts';
import { launchBrowser, newContext, requestsElsewhere, screenshot, signIn } from '../helpers/browser.ts';
import { createUser } from '../../control-plane/services/users.ts';

const PASSWORD = 'a long enough password';
const MEMBER = 'ana@example.com';
const WORK = `export default function (req: Request): Response {
  if (new URL(req.url).searchParams.has('fail')) throw new Error('asked to fail');
  return new Response('done');
}
`;

let t0: TestBerth;
/** The server's clock runs this far from the real one while earlier hours' traffic is made. */
let offsetMs = 0;
/** Requests made in earlier hours (2 to 23 hours ago), outside the last hour. */
let earlier = 0;
let browser: Browser;
let page: Page;
let site: { id: string; subdomain: string };
let elsewhere: string[] = [];

interface Point {
  at: string;
  status: Record<'2xx' | '3xx' | '4xx' | '5xx', number>;
}

test.before(async () => {
  t0 = await startTestBerth({}, { now: () => new Date(Date.now() + offsetMs) });
  await createUser(t0.berth.deps, { email: MEMBER, accountId: t0.owner.id, role: 'MEMBER', password: PASSWORD });
  const created = await createSite(t0.owner, { name: 'Busy', subdomain: 'busy' });
  site = { id: created.id, subdomain: created.subdomain };
  await putFile(t0.owner, created.bucketId, 'web/index.html', '<h1>busy</h1>', 'text/html');
  await putFile(t0.owner, created.bucketId, 'api/work.ts', WORK, 'text/typescript');
  const pages = t0.site(site.subdomain);
  // A day's shape for the charts: each earlier hour a few page loads, now and then a missing page.
  for (let hoursAgo = 23; hoursAgo >= 2; hoursAgo--) {
    offsetMs = -hoursAgo * 3600_000;
    const loads = 2 + ((hoursAgo * 7) % 9);
    for (let i = 0; i < loads; i++) await pages.get('index.html');
    if (hoursAgo % 5 === 0) await pages.get('missing.html');
    earlier += loads + (hoursAgo % 5 === 0 ? 1 : 0);
  }
  offsetMs = 0;
  for (let i = 0; i < 12; i++) await pages.get('index.html');
  for (let i = 0; i < 2; i++) await pages.get('missing.html');
  for (let i = 0; i < 4; i++) await pages.get(i === 0 ? 'api/work?fail=1' : 'api/work');
  browser = await launchBrowser();
  page = await (await newContext(browser)).newPage();
  elsewhere = requestsElsewhere(page, t0.url);
  await signIn(page, t0.url, MEMBER, PASSWORD);
});

test.after.always(async () => {
  await browser?.close();
  await t0?.dispose();
});

const figure = (title: string) => page.locator(`figure[data-chart="${title}"]`);

/** The chart's table as rows of cell texts. */
async function tableOf(title: string): Promise<string[][]> {
  return figure(title)
    .locator('details tbody tr')
    .evaluateAll((rows) => rows.map((row) => [...row.querySelectorAll('td')].map((td) => td.textContent ?? '')));
}

test.serial('the overview opens on the last 24 hours, drawn from the API’s numbers', async (t) => {
  await page.goto(`${t0.url}/#/sites/${site.id}`);
  await page.locator('section.traffic[data-loaded="24h"]').waitFor();
  const api = json<{ totals: { requests: number }; series: Point[] }>(
    await t0.owner.read.get(`v0/sites/${site.id}/analytics`, { searchParams: { step: 'hour' } }),
  );
  t.is(api.totals.requests, 18 + earlier);
  const tile = async (name: string) => (await page.locator('.tile').filter({ hasText: name }).textContent()) ?? '';
  t.regex(await tile('Requests'), new RegExp(String(18 + earlier)));
  t.regex(await tile('Function errors'), /1 of 4/);

  // The chart is drawn (uPlot's canvas, at the figure's width) and its table holds the API's points.
  const canvas = figure('Requests by status').locator('canvas');
  await canvas.waitFor();
  t.true((await canvas.evaluate((el) => (el as unknown as { width: number }).width)) > 200);
  const rows = await tableOf('Requests by status');
  t.is(rows.length, api.series.length);
  t.deepEqual(
    rows.map((cells) => cells.slice(1).map(Number)),
    api.series.map((p) => [p.status['2xx'], p.status['3xx'], p.status['4xx'], p.status['5xx']]),
  );
  const errors = await tableOf('Function calls');
  t.deepEqual(
    errors.reduce((sum, cells) => [sum[0]! + Number(cells[1]), sum[1]! + Number(cells[2])], [0, 0]),
    [4, 1],
  );
  t.regex(
    (await figure('Requests by status').locator('.u-legend').textContent()) ?? '',
    /2xx[\s\S]*3xx[\s\S]*4xx[\s\S]*5xx/,
  );
  t.deepEqual(elsewhere, []);
  await screenshot(page, 'overview');
});

test.serial('the range buttons switch the charts to another range and step', async (t) => {
  await page.getByRole('button', { name: '1 hour' }).click();
  await page.locator('section.traffic[data-loaded="1h"]').waitFor();
  t.is(await page.getByRole('button', { name: '1 hour' }).getAttribute('aria-pressed'), 'true');
  t.is(await page.getByRole('button', { name: '24 hours' }).getAttribute('aria-pressed'), 'false');
  const rows = await tableOf('Requests by status');
  t.true(rows.length >= 60 && rows.length <= 61, `${rows.length} minutes`);
  t.deepEqual(
    rows.reduce((sum, cells) => sum.map((n, i) => n + Number(cells[i + 1])), [0, 0, 0, 0]),
    [15, 0, 2, 1],
  );
  await page.getByRole('button', { name: '30 days' }).click();
  await page.locator('section.traffic[data-loaded="30d"]').waitFor();
  t.is((await tableOf('Requests by status')).length, 31);
});

test.serial('the sites list shows every site’s traffic of the last 24 hours', async (t) => {
  await createSite(t0.owner, { name: 'Quiet', subdomain: 'quiet' });
  await page.goto(`${t0.url}/#/sites`);
  const row = (name: string) => page.locator('tbody tr').filter({ has: page.getByRole('link', { name, exact: true }) });
  await row('Busy').locator('svg.sparkline').waitFor();
  const cells = (name: string) =>
    row(name)
      .locator('td')
      .evaluateAll((tds) => Object.fromEntries(tds.map((td) => [td.dataset.label, td.textContent])));
  const busy = await cells('Busy');
  t.is(busy['Requests, 24 h'], String(18 + earlier));
  t.is(busy['Errors (5xx)'], '1', 'the one function call that threw');
  t.regex(
    (await row('Busy').locator('svg.sparkline title').textContent()) ?? '',
    /^Busy, requests by the hour: (\d+, )+18$/,
  );
  const quiet = await cells('Quiet');
  t.is(quiet['Requests, 24 h'], '0');
  t.deepEqual(elsewhere, []);
});
