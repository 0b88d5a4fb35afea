// The dashboard's Deployments tab in a real browser (Debian's Chromium) whose local time zone is not
// UTC: the history of deployments made through the API, newest first, single-file writes hidden until
// asked for; a FAILED one with its file's error at its place; a hostile message shown as text; one
// deployment's diff, files and preview link; "Roll back to this" behind a confirmation naming what
// changes, after which the site serves the earlier files; restore to a time between two deployments
// through the form, its files shown first; a time before the history; a rollback from a deployment's
// page; deployments found past pages of single-file writes, and Load more; a phone's width; and the
// npm packages a deployment's lock pins.
// BERTH_SCREENSHOTS=1 also writes docs/screenshots/deployments.png and phone-deployments.png.
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { type TestBerth, createSite, putFile, startTestBerth } from '../helpers/berth.ts';
import { launchBrowser, newContext, overflowsSideways, screenshot, signIn } from '../helpers/browser.ts';
import { until } from '../helpers/until.ts';
import { siteWithDatabase } from '../helpers/databases.ts';
import { createUser } from '../../control-plane/services/users.ts';

const PASSWORD = 'a long enough password';
const ADMIN = 'ada@example.com';
const HOSTILE = '<img src=x onerror=alert(1)>';
/** +05:30 all year, no daylight saving: the form's local time is never UTC by accident. */
const ZONE = 'Asia/Kolkata';
const ZONE_OFFSET_MS = 5.5 * 3600_000;

interface Deployment {
  id: string;
  shortId: string;
  kind: string;
  status: string;
  current: boolean;
  author: string;
  message: string | null;
  publishedAt: string | null;
  restoredAt: string | null;
  sourceDeploymentId: string | null;
  previewUrl: string;
  previewAccess: 'PRIVATE' | 'PUBLIC';
  previewSecrets: boolean;
  errors: Array<{ path: string; message: string; line: number; column: number }> | null;
}

let t0: TestBerth;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let site: { id: string; subdomain: string; bucketId: string };
let first: Deployment;
let second: Deployment;
let failed: Deployment;
/** An instant, to the second, after the first deployment and before the second. */
let between: string;
const dialogs: string[] = [];
let confirmWith = false;
const confirmations: string[] = [];

/** Declares `files` with their text inline and publishes them; the deployment as the list shows it. */
async function deploy(files: Record<string, string>, message: string): Promise<Deployment> {
  const created = await t0.owner.api.post(`v0/sites/${site.id}/deployments`, {
    json: {
      files: Object.entries(files).map(([path, content]) => ({
        path,
        content,
        contentType: path.endsWith('.html') ? 'text/html' : path.endsWith('.ts') ? 'text/typescript' : 'text/plain',
      })),
      message,
    },
  });
  if (created.statusCode !== 201) throw new Error(`create: ${created.statusCode} ${JSON.stringify(created.body)}`);
  const { id } = (created.body as unknown as { deployment: Deployment }).deployment;
  await t0.owner.api.post(`v0/sites/${site.id}/deployments/${id}/publish`);
  return apiDeployment(id);
}

const apiDeployments = async (): Promise<Deployment[]> =>
  (await t0.owner.read.get(`v0/sites/${site.id}/deployments`).json<{ deployments: Deployment[] }>()).deployments;
const apiDeployment = async (id: string): Promise<Deployment> =>
  (await t0.owner.read.get(`v0/sites/${site.id}/deployments/${id}`).json<{ deployment: Deployment }>()).deployment;
const served = async (path: string) => {
  const res = await t0.site(site.subdomain).get(path);
  return res.statusCode === 200 ? res.body : res.statusCode;
};

/** `iso` as a datetime-local value in ZONE, to the second. */
const inZone = (iso: string): string => new Date(Date.parse(iso) + ZONE_OFFSET_MS).toISOString().slice(0, 19);

test.before(async () => {
  t0 = await startTestBerth();
  await createUser(t0.berth.deps, { email: ADMIN, accountId: t0.owner.id, role: 'ADMIN', password: PASSWORD });
  site = await createSite(t0.owner, { name: 'Blog', subdomain: 'blog' });
  await putFile(t0.owner, site.bucketId, 'web/notes.txt', 'notes', 'text/plain');
  first = await deploy({ 'web/index.html': '<p>one</p>', 'web/app.js': 'one()' }, 'first');
  // The restore test goes back to a whole second between the first deployment and the second.
  const published = Date.parse(first.publishedAt!);
  await until(() => Math.floor(Date.now() / 1000) * 1000 > published, 'a second after the first deployment');
  between = new Date(Math.floor(Date.now() / 1000) * 1000).toISOString();
  second = await deploy(
    { 'web/index.html': '<p>two</p>', 'web/app.js': 'one()', 'web/new.html': '<p>new</p>' },
    HOSTILE,
  );
  failed = await deploy(
    { 'web/index.html': '<p>broken</p>', 'api/bad.ts': 'export default function (\n  oops' },
    'broken build',
  );

  browser = await launchBrowser();
  context = await newContext(browser, { timezoneId: ZONE });
  page = await context.newPage();
  page.on('dialog', (dialog) => {
    if (dialog.type() === 'confirm') {
      confirmations.push(dialog.message());
      void (confirmWith ? dialog.accept() : dialog.dismiss());
      return;
    }
    // Any other dialog would be a tenant string run as HTML.
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

const history = () => page.getByRole('table', { name: 'Deployments' });
const rowOf = (d: Deployment) =>
  history()
    .getByRole('row')
    .filter({ has: page.getByRole('link', { name: `Deployment ${d.shortId}` }) });
const cell = (d: Deployment, column: number) => rowOf(d).getByRole('cell').nth(column);
const shownIds = () => history().locator('tbody tr td:first-child a').allTextContents();
const filter = () => page.getByLabel('Deployments only (hide single-file writes)');

test.serial(
  'the tab lists the deployments made through the API, newest first, file writes hidden until asked for',
  async (t) => {
    t.true(second.publishedAt! > between && first.publishedAt! <= between, 'the instant falls between the two');
    t.is(failed.status, 'FAILED');
    await page.goto(`${t0.url}/#/sites/${site.id}`);
    await page.getByRole('navigation', { name: 'Site' }).getByRole('link', { name: 'Deployments' }).click();
    await history().waitFor();
    t.is(
      await page
        .getByRole('navigation', { name: 'Site' })
        .getByRole('link', { name: 'Deployments' })
        .getAttribute('aria-current'),
      'page',
    );
    t.deepEqual(await history().getByRole('columnheader').allTextContents(), [
      'Deployment',
      'Status',
      'Message',
      'Author',
      'Files',
      'When',
      'Actions',
    ]);

    t.true(await filter().isChecked(), 'deployments only, by default');
    t.deepEqual(await shownIds(), [failed.shortId, second.shortId, first.shortId]);
    await page.getByText('1 single-file write hidden.').waitFor();

    t.regex((await cell(second, 1).textContent())!, /^PUBLISHED\s*Current$/);
    t.is(await cell(first, 1).textContent(), 'PUBLISHED');
    t.is(await cell(first, 2).textContent(), 'first');
    t.is(await cell(first, 3).textContent(), `API key ${first.author.slice(0, 8)}`);
    t.regex((await cell(second, 4).textContent())!, /^3 files\s*\d+ B$/);
    t.is(await cell(first, 0).textContent(), `${first.shortId}Deployment`);
    t.is(
      await rowOf(first)
        .getByRole('button', { name: `Roll back to ${first.shortId}` })
        .count(),
      1,
    );
    t.is(await rowOf(second).getByRole('button').count(), 0, 'the current one is not rolled back to');
    t.is(await rowOf(failed).getByRole('button').count(), 0, 'nor a FAILED one');

    await filter().uncheck();
    const all = await apiDeployments();
    t.deepEqual(
      await shownIds(),
      all.map((d) => d.shortId),
    );
    const write = all.at(-1)!;
    t.is(write.kind, 'FILE');
    t.is(await cell(write, 0).textContent(), `${write.shortId}File write`);
    await filter().check();
    t.deepEqual(await shownIds(), [failed.shortId, second.shortId, first.shortId]);
  },
);

test.serial('a FAILED deployment lists its file’s error at its place', async (t) => {
  const [problem] = failed.errors!;
  t.is(problem!.path, 'api/bad.ts');
  t.true(problem!.line >= 1);
  const status = cell(failed, 1);
  t.is(
    await status.getByRole('listitem').textContent(),
    `api/bad.ts:${problem!.line}:${problem!.column} ${problem!.message}`,
  );
  t.regex((await status.textContent())!, /^FAILED/);
  t.false((await status.textContent())!.includes('Current'));
});

test.serial('a hostile message is shown as text', async (t) => {
  t.is(await cell(second, 2).textContent(), HOSTILE);
  t.is(await page.locator('main img').count(), 0, 'never HTML');
});

test.serial('a deployment’s page shows its diff, the files it set and its preview link', async (t) => {
  await page.getByRole('link', { name: `Deployment ${second.shortId}` }).click();
  await page.getByRole('heading', { name: `Deployment ${second.shortId}` }).waitFor();
  t.deepEqual(await page.getByRole('list', { name: 'Added' }).getByRole('listitem').allTextContents(), [
    'web/new.html',
  ]);
  t.deepEqual(await page.getByRole('list', { name: 'Changed' }).getByRole('listitem').allTextContents(), [
    'web/index.html',
  ]);
  await page.getByRole('heading', { name: 'Removed (0)' }).waitFor();
  t.is(await page.getByRole('list', { name: 'Removed' }).count(), 0);
  const files = page.getByRole('table', { name: `Files of ${second.shortId}` });
  t.deepEqual(await files.locator('tbody tr td:first-child').allTextContents(), [
    'web/app.js',
    'web/index.html',
    'web/new.html',
  ]);
  t.is(await page.getByRole('link', { name: `Preview ${second.shortId}` }).getAttribute('href'), second.previewUrl);
  t.regex(second.previewUrl, new RegExp(`^http://${second.shortId}--${site.subdomain}\\.`));
  await page.getByText(HOSTILE, { exact: true }).waitFor();
  t.is(await page.locator('main img').count(), 0);
  t.is(await page.getByRole('button', { name: `Roll back to ${second.shortId}` }).count(), 0);

  // Its preview opens for members only until made public, and gets the site's secrets only when given.
  await page.getByText('Members of the account only').waitFor();
  await page.getByRole('button', { name: 'Make public' }).click();
  await page.getByText('Anyone, as the live site').waitFor();
  t.is((await apiDeployment(second.id)).previewAccess, 'PUBLIC');
  await page.getByRole('button', { name: 'Give secrets' }).click();
  await page.getByRole('button', { name: 'Take back' }).waitFor();
  t.true((await apiDeployment(second.id)).previewSecrets);
  await page.getByRole('button', { name: 'Members only' }).click();
  await page.getByText('Members of the account only').waitFor();
  t.is((await apiDeployment(second.id)).previewAccess, 'PRIVATE');

  // The failed one says why, and is not against what was published before it.
  await page.getByRole('link', { name: 'All deployments' }).click();
  await page.getByRole('link', { name: `Deployment ${failed.shortId}` }).click();
  await page.getByRole('heading', { name: 'Why it failed (the site did not change)' }).waitFor();
  t.deepEqual(await page.getByRole('list', { name: 'Added' }).getByRole('listitem').allTextContents(), ['api/bad.ts']);
  await page.getByRole('link', { name: 'All deployments' }).click();
  await history().waitFor();
});

test.serial(
  'Roll back asks first, naming what changes; confirmed, the site serves the earlier deployment',
  async (t) => {
    const button = rowOf(first).getByRole('button', { name: `Roll back to ${first.shortId}` });
    confirmWith = false;
    await button.click();
    await until(() => confirmations.length === 1, 'the rollback to ask first');
    t.regex(
      confirmations[0]!,
      new RegExp(
        `^Roll back to ${first.shortId} \\(“first”\\)\\? The site becomes what it was right after it was published on .+: web/index\\.html changes; web/new\\.html is removed\\. The rollback is recorded as a new deployment\\.$`,
      ),
    );
    t.true((await apiDeployment(second.id)).current, 'a cancelled rollback changes nothing');
    t.is(await served('index.html'), '<p>two</p>');

    confirmWith = true;
    await button.click();
    await page.getByText(`Rolled back to ${first.shortId}: the site is what it was right after it.`).waitFor();
    const [made] = await apiDeployments();
    t.like(made, { kind: 'PROMOTE', status: 'PUBLISHED', current: true, message: `back to ${first.shortId}` });
    t.is(await served('index.html'), '<p>one</p>');
    t.is(await served('new.html'), 404);
    t.is(await served('notes.txt'), 'notes');
    t.is(await cell(made!, 0).textContent(), `${made!.shortId}Rollback`);
    t.regex((await cell(made!, 1).textContent())!, /Current/);
    t.is(
      await rowOf(second)
        .getByRole('button', { name: `Roll back to ${second.shortId}` })
        .count(),
      1,
    );
  },
);

test.serial('Restore to a time shows the files at that time first, then puts them back', async (t) => {
  const third = await deploy({ 'web/index.html': '<p>three</p>', 'web/later.html': 'later' }, 'third');
  await page.reload();
  await rowOf(third).waitFor();
  const input = page.getByLabel('Time', { exact: true });
  await input.fill(inZone(between));
  await page.getByText(`= ${between} (UTC)`).waitFor();
  await page.getByRole('button', { name: 'Show the site at that time' }).click();
  const files = page.getByRole('table', { name: 'Files at that time' });
  await files.waitFor();
  t.regex((await page.getByRole('heading', { name: /^The site at / }).textContent())!, /: 3 files, \d+ B$/);
  t.deepEqual(await files.locator('tbody tr td:first-child').allTextContents(), [
    'web/app.js',
    'web/index.html',
    'web/notes.txt',
  ]);
  t.is(await served('index.html'), '<p>three</p>', 'showing changes nothing');
  await screenshot(page, 'deployments');

  await page.getByRole('button', { name: 'Restore the site to this time' }).click();
  await page.getByText(/^Restored: the site is what it was at .+, as deployment [a-z0-9]{8}\.$/).waitFor();
  const [made] = await apiDeployments();
  t.like(made, { kind: 'RESTORE', status: 'PUBLISHED', current: true });
  t.is(made!.restoredAt, new Date(between).toISOString());
  t.is(await served('index.html'), '<p>one</p>');
  t.is(await served('later.html'), 404);
  t.is(await served('new.html'), 404);
  t.is(await files.count(), 0, 'the preview is gone once restored');
  await rowOf(made!).waitFor();
});

test.serial('a time before the history says from when the site can be restored', async (t) => {
  const early = await t0.owner.read.get(`v0/sites/${site.id}/snapshot`, {
    searchParams: { at: '2000-12-31T18:30:00Z' },
  });
  t.is(early.statusCode, 422);
  const { error } = early.body as unknown as { error: { code: string; message: string } };
  t.is(error.code, 'before_history');

  await page.getByLabel('Time', { exact: true }).fill('2001-01-01T00:00:00');
  await page.getByRole('button', { name: 'Show the site at that time' }).click();
  const alert = page.getByRole('alert').filter({ hasText: error.message });
  await alert.waitFor();
  t.regex((await alert.textContent())!, /\. The site can be restored to any time from .+ on\.$/);
  t.is(await page.getByRole('button', { name: 'Restore the site to this time' }).count(), 0);
});

test.serial('Roll back from a deployment’s page opens the rollback it made', async (t) => {
  await page.goto(`${t0.url}/#/sites/${site.id}/deployments/${second.id}`);
  confirmWith = true;
  const asked = confirmations.length;
  await page.getByRole('button', { name: `Roll back to ${second.shortId}` }).click();
  await until(() => confirmations.length === asked + 1, 'the rollback to ask first');
  t.regex(confirmations.at(-1)!, /: web\/index\.html changes; web\/new\.html comes back\. /);
  await page
    .getByRole('heading', { name: /^Deployment [a-z0-9]{8}$/ })
    .filter({ hasNotText: second.shortId })
    .waitFor();
  const [made] = await apiDeployments();
  await page.getByRole('heading', { name: `Deployment ${made!.shortId}` }).waitFor();
  t.like(made, { kind: 'PROMOTE', current: true, sourceDeploymentId: second.id });
  t.regex((await page.locator('dl.facts').textContent())!, /KindRollbackStatusPUBLISHED\s*Current/);
  t.is(await served('new.html'), '<p>new</p>');
});

test.serial(
  'with many single-file writes, the deployments among them are found and Load more brings older ones',
  async (t) => {
    const other = await createSite(t0.owner, { name: 'Busy', subdomain: 'busy' });
    const deployTo = async (content: string) => {
      const res = await t0.owner.api.post(`v0/sites/${other.id}/deployments`, {
        json: { files: [{ path: 'web/index.html', content, contentType: 'text/html' }], message: content },
      });
      const { deployment } = res.body as unknown as { deployment: Deployment };
      t.is((await t0.owner.api.post(`v0/sites/${other.id}/deployments/${deployment.id}/publish`)).statusCode, 200);
      return deployment;
    };
    /** 60 writes: more than a page of the history (50), so the first page holds nothing but writes. */
    const writes = async (batch: string) => {
      for (let i = 0; i < 60; i += 10)
        await Promise.all(
          Array.from({ length: 10 }, (_, j) => putFile(t0.owner, other.bucketId, `web/${batch}/${i + j}.txt`, 'x')),
        );
    };
    const older = await deployTo('older');
    await writes('a');
    const newer = await deployTo('newer');
    await writes('b');

    await page.goto(`${t0.url}/#/sites/${other.id}/deployments`);
    await history().waitFor();
    t.deepEqual(await shownIds(), [newer.shortId], 'found past a first page of writes only');
    await page.getByText('99 single-file writes hidden.').waitFor();
    await page.getByRole('button', { name: 'Load older deployments' }).click();
    await page.getByText('120 single-file writes hidden.').waitFor();
    t.deepEqual(await shownIds(), [newer.shortId, older.shortId]);
    t.is(await page.getByRole('button', { name: 'Load older deployments' }).count(), 0, 'the history is all shown');
    await filter().uncheck();
    t.is((await shownIds()).length, 122);
  },
);

test.serial('the tab and a deployment’s page fit a phone’s width', async (t) => {
  const phone = await newContext(browser, { width: 375, height: 740, timezoneId: ZONE });
  const small = await phone.newPage();
  await signIn(small, t0.url, ADMIN, PASSWORD);
  await small.goto(`${t0.url}/#/sites/${site.id}/deployments`);
  await small.getByRole('table', { name: 'Deployments' }).waitFor();
  await small.waitForLoadState('networkidle');
  t.false(await overflowsSideways(small), 'the history fits 375 px');
  await screenshot(small, 'phone-deployments');

  await small.goto(`${t0.url}/#/sites/${site.id}/deployments/${second.id}`);
  await small.getByRole('table', { name: `Files of ${second.shortId}` }).waitFor();
  t.false(await overflowsSideways(small), 'a deployment’s page fits 375 px');
  await phone.close();
});

test.serial('a deployment’s page lists the npm packages its deno.lock pins, and those it added', async (t) => {
  const lock = {
    version: '5',
    npm: {
      'hono@4.13.19': { integrity: 'sha512-aaaa' },
      '@scope/tool@1.2.0': { integrity: 'sha512-bbbb' },
    },
  };
  const locked = await deploy({ 'web/index.html': '<h1>locked</h1>', 'deno.lock': JSON.stringify(lock) }, 'a lock');
  await page.goto(`${t0.url}/#/sites/${site.id}/deployments/${locked.id}`);
  await page.getByRole('heading', { name: 'Packages (2)' }).waitFor();
  t.deepEqual(await page.getByRole('list', { name: 'Packages' }).getByRole('listitem').allTextContents(), [
    '@scope/tool@1.2.0',
    'hono@4.13.19',
  ]);
  t.deepEqual(await page.getByRole('list', { name: 'Package changes' }).getByRole('listitem').allTextContents(), [
    '+ @scope/tool@1.2.0',
    '+ hono@4.13.19',
  ]);
});

test.serial(
  'Restore with “the database too” shows each table’s rows then and now, restores both, and undoes both',
  async (t) => {
    const { site: shop, base, query } = await siteWithDatabase(t0.owner, { name: 'Shop', subdomain: 'shop' });
    const rows = async () => (await query('SELECT count(*) AS n FROM orders')).body.result[0]!.results[0]!.n as number;
    const replicated = (since: number) =>
      until(async () => {
        const points = (await t0.owner.read.get(`${base}/restore-points`)).body as unknown as { latest: string | null };
        return points.latest !== null && Date.parse(points.latest) > since;
      }, 'the writes to reach the replica');
    await query('CREATE TABLE orders (item TEXT)');
    await query("INSERT INTO orders VALUES ('one')");
    await replicated(Date.now());
    await sleep(1100);
    const then = new Date(Math.floor(Date.now() / 1000) * 1000).toISOString();
    await sleep(1100);
    await query("INSERT INTO orders VALUES ('two'), ('three')");
    await replicated(Date.now());

    await page.goto(`${t0.url}/#/sites/${shop.id}/deployments`);
    await page.getByLabel('Time', { exact: true }).fill(inZone(then));
    await page.getByLabel('The database too, to the same second').check();
    await page.getByRole('button', { name: 'Show the site at that time' }).click();
    const tables = page.getByRole('table', { name: 'Tables then and now' });
    await tables.waitFor();
    t.deepEqual(await tables.locator('tbody tr td').allTextContents(), ['orders', '1', '3', '+2 rows since']);
    t.is(await rows(), 3, 'showing changes nothing');

    await page.getByRole('button', { name: 'Restore the site and its database to this time' }).click();
    await page
      .getByText(/^Restored: the site is what it was at .+, its database too, as deployment [a-z0-9]{8}\.$/)
      .waitFor();
    t.is(await rows(), 1);
    await replicated(Date.now());
    await page.getByRole('button', { name: 'Undo: back to just before the restore' }).click();
    await page.getByText(/^Undone: the site and its database are back as they were/).waitFor();
    t.is(await rows(), 3);
  },
);
