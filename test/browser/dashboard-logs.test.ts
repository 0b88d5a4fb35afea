// The dashboard's Logs tab in a real browser (Debian's Chromium): the recent lines, then a line a
// function logs shown within 2 s of the call, filters that hide the lines they do not pass, pause and
// resume, and nothing loaded from another host.
import test from 'ava';
import type { Browser, Page } from 'playwright-core';
import { type TestBerth, createSite, deployFixture, startTestBerth } from '../helpers/berth.ts';
import { launchBrowser, newContext, requestsElsewhere, signIn } from '../helpers/browser.ts';
import { createUser } from '../../control-plane/services/users.ts';

const PASSWORD = 'a long enough password';
const MEMBER = 'lin@example.com';

let t0: TestBerth;
let browser: Browser;
let page: Page;
let site: { id: string; subdomain: string };
let elsewhere: string[] = [];

test.before(async () => {
  t0 = await startTestBerth();
  await createUser(t0.berth.deps, { email: MEMBER, accountId: t0.owner.id, role: 'MEMBER', password: PASSWORD });
  const created = await createSite(t0.owner, { name: 'Chatty', subdomain: 'chatty' });
  site = { id: created.id, subdomain: created.subdomain };
  await deployFixture(t0.owner, created.bucketId, 'say');
  browser = await launchBrowser();
  page = await (await newContext(browser)).newPage();
  elsewhere = requestsElsewhere(page, t0.url);
  await signIn(page, t0.url, MEMBER, PASSWORD);
});

test.after.always(async () => {
  await browser?.close();
  await t0?.dispose();
});

const say = async (message: string, level = 'log') => {
  const res = await t0.site(site.subdomain).get('api/say', { searchParams: { m: message, level } });
  if (res.statusCode !== 200) throw new Error(`api/say answered ${res.statusCode}`);
};
const rows = () => page.locator('#log-rows tr');
const rowWith = (text: string) => rows().filter({ hasText: text });

test.serial('the Logs tab shows the recent lines, then a new line within 2 s of the call', async (t) => {
  await say('logged before the page opened', 'info');
  await page.goto(`${t0.url}/#/sites/${site.id}`);
  await page.getByRole('link', { name: 'Logs' }).click();
  await rowWith('logged before the page opened').waitFor();
  await page.getByText('Following new lines.').waitFor();
  await say('logged while watching', 'warn');
  await rowWith('logged while watching').waitFor({ timeout: 2000 });
  t.is(await rows().count(), 2);
  // Newest on top, with its level and function.
  t.regex(
    (await rows().first().locator('td').allTextContents()).join(' '),
    /WARN\s+api\/say\.ts\s+logged while watching/,
  );
  t.deepEqual(elsewhere, []);
});

test.serial('filters hide the lines they do not pass, recent and live', async (t) => {
  await page.getByLabel('Level').selectOption('error');
  await rowWith('logged while watching').waitFor({ state: 'detached' });
  t.is(await rows().count(), 0);
  await say('an info line the filter hides', 'info');
  await say('an error line it shows', 'error');
  await rowWith('an error line it shows').waitFor({ timeout: 2000 });
  t.is(await rowWith('an info line the filter hides').count(), 0);

  await page.getByLabel('Level').selectOption({ label: 'All levels' });
  await page.getByLabel('Contains').fill('NEEDLE');
  await rowWith('an error line it shows').waitFor({ state: 'detached' });
  await say('no match here', 'error');
  await say('a needle in the message');
  await rowWith('a needle in the message').waitFor({ timeout: 2000 });
  t.is(await rowWith('no match here').count(), 0);
  t.is(await rows().count(), 1);
});

test.serial('paused, the view stands still; resumed, it catches up', async (t) => {
  await page.getByRole('button', { name: 'Pause' }).click();
  await page.getByText('Paused.').waitFor();
  await say('needle logged while paused');
  // The line is stored (the list has it) while the paused view does not show it.
  const stored = async () =>
    JSON.stringify((await t0.owner.read.get(`v0/sites/${site.id}/logs`)).body).includes('needle logged while paused');
  while (!(await stored())) await page.waitForTimeout(50);
  await page.waitForTimeout(1500);
  t.is(await rowWith('needle logged while paused').count(), 0);
  await page.getByRole('button', { name: 'Resume' }).click();
  await rowWith('needle logged while paused').waitFor({ timeout: 2000 });
  t.is(await rows().count(), 2);
  t.deepEqual(elsewhere, []);
});
