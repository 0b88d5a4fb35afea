// The database page's time travel in a real browser (Debian's Chromium) whose local time zone is not
// UTC: the range the replica holds; rows written through the API, then a restore to a moment before
// them picked in the time box and confirmed by typing the subdomain, after which the API reads no rows;
// Undo brings them back. A MEMBER sees the range and no Restore button.
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { type TestBerth, json, startTestBerth } from '../helpers/berth.ts';
import { launchBrowser, newContext, signIn } from '../helpers/browser.ts';
import { type SiteWithDatabase, siteWithDatabase } from '../helpers/databases.ts';
import { until } from '../helpers/until.ts';
import { createUser } from '../../control-plane/services/users.ts';

const PASSWORD = 'a long enough password';
const ADMIN = 'ada@example.com';
const MEMBER = 'mel@example.com';
/** +05:30 all year, no daylight saving: the form's local time is never UTC by accident. */
const ZONE = 'Asia/Kolkata';
const ZONE_OFFSET_MS = 5.5 * 3600_000;

interface Points {
  earliest: string | null;
  latest: string | null;
}

let t0: TestBerth;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let db: SiteWithDatabase;
const dialogs: string[] = [];

/** `iso` as a datetime-local value in ZONE, to the second. */
const inZone = (iso: string): string => new Date(Date.parse(iso) + ZONE_OFFSET_MS).toISOString().slice(0, 19);
const second = (ms: number) => new Date(Math.floor(ms / 1000) * 1000).toISOString();

/** Waits until the replica holds every write made up to now. */
async function replicated(): Promise<Points> {
  const now = Date.now();
  return until(async () => {
    const points = json<Points>(await t0.owner.read.get(`${db.base}/restore-points`));
    return points.latest !== null && Date.parse(points.latest) >= Math.floor(now / 1000) * 1000 && points;
  }, 'the writes to reach the replica');
}

const bodies = async () =>
  (await db.query('SELECT body FROM notes ORDER BY rowid')).body.result[0]!.results.map((r) => r.body);

test.before(async () => {
  t0 = await startTestBerth();
  await createUser(t0.berth.deps, { email: ADMIN, accountId: t0.owner.id, role: 'ADMIN', password: PASSWORD });
  await createUser(t0.berth.deps, { email: MEMBER, accountId: t0.owner.id, role: 'MEMBER', password: PASSWORD });
  db = await siteWithDatabase(t0.owner, { name: 'Ledger', subdomain: 'ledger' });
  browser = await launchBrowser();
  context = await newContext(browser, { timezoneId: ZONE });
  page = await context.newPage();
  // Nothing here opens a dialog; one would be a tenant string run as HTML.
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  await signIn(page, t0.url, ADMIN, PASSWORD);
});

test.after.always(async () => {
  await browser?.close();
  await t0?.dispose();
});

test.afterEach(() => {
  if (dialogs.length > 0) throw new Error(`a dialog opened: ${dialogs.join(', ')}`);
});

const databasePage = () => `${t0.url}/#/sites/${db.site.id}/database`;

test.serial(
  'Time travel: the range, a restore to a moment before rows written, confirmed by the subdomain, and Undo',
  async (t) => {
    await db.query('CREATE TABLE notes (body TEXT)');
    await db.query('INSERT INTO notes (body) VALUES (?)', ['kept']);
    const points = await replicated();
    await page.goto(databasePage());
    const range = page.getByText(/^Restorable to any second from /);
    await range.waitFor();
    t.is(
      await range.locator('time').first().getAttribute('datetime'),
      new Date(points.earliest!).toISOString(),
      'the earliest moment, in UTC for machines and the tooltip',
    );
    const input = page.getByLabel('Time', { exact: true });
    t.is(await input.getAttribute('min'), inZone(points.earliest!));

    await page.getByRole('button', { name: '1 hour ago' }).click();
    const hourAgo = Date.parse(`${await input.inputValue()}Z`) - ZONE_OFFSET_MS;
    t.true(Math.abs(hourAgo - (Date.now() - 3600_000)) < 60_000, 'the quick choice fills the box in local time');

    // A restore to a moment holds the writes committed up to about a second before it.
    await sleep(1500);
    const before = second(Date.now() + 1000);
    await sleep(2500);
    await db.query('INSERT INTO notes (body) VALUES (?), (?)', ['one', 'two']);
    await replicated();
    t.deepEqual(await bodies(), ['kept', 'one', 'two']);

    // The range shown at page load ends before the rows; Refresh brings it up to date.
    await page.getByRole('button', { name: 'Refresh the restorable range' }).click();
    await until(async () => (await input.getAttribute('max'))! > inZone(before), 'the range to reach the rows');
    await input.fill(inZone(before));
    await page.getByText(`= ${new Date(before).toISOString()} (UTC)`).waitFor();
    await page.getByRole('button', { name: 'Restore…' }).click();
    const typed = page.getByLabel('Type the subdomain');
    await typed.fill('other');
    await page.getByRole('button', { name: 'Restore the database' }).click();
    await page.getByRole('alert').filter({ hasText: 'type ledger to confirm the restore' }).waitFor();
    t.deepEqual(await bodies(), ['kept', 'one', 'two'], 'nothing is restored without the subdomain');

    await typed.fill('ledger');
    await page.getByRole('button', { name: 'Restore the database' }).click();
    const restored = page.getByText(/^Restored to /);
    await restored.waitFor();
    t.is(await restored.locator('time').getAttribute('datetime'), new Date(before).toISOString());
    t.deepEqual(await bodies(), ['kept']);

    await page.getByRole('button', { name: 'Undo the restore' }).click();
    await page.getByText(/^Undone: the database is back as it was at /).waitFor();
    t.deepEqual(await bodies(), ['kept', 'one', 'two']);
  },
);

test.serial('a MEMBER sees the range and no way to restore', async (t) => {
  const member = await newContext(browser, { timezoneId: ZONE });
  const tab = await member.newPage();
  await signIn(tab, t0.url, MEMBER, PASSWORD);
  await tab.goto(databasePage());
  await tab.getByText(/^Restorable to any second from /).waitFor();
  await tab.getByText('The account’s ADMINs can restore it.').waitFor();
  t.is(await tab.getByRole('button', { name: 'Restore…' }).count(), 0);
  t.is(await tab.getByLabel('Time', { exact: true }).count(), 0);
  await member.close();
});
