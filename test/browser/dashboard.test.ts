// The dashboard in a real browser (Debian's Chromium, driven by playwright-core), against a real server:
// sign in, make a site, upload its page with the file picker and read it at its own host, make it
// PRIVATE and pass the gate in a fresh browser, a non-member's 403, a WRITE key made here and used
// with the API, a secret revealed and its DASHBOARD entry in the access log, a query's table, stored
// bytes on the Usage page and an old version deleted, a database's size and compaction, a phone's
// width, and sign-out. BERTH_SCREENSHOTS=1 also writes docs/screenshots/*.png.
import test from 'ava';
import got from 'got';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { type TestBerth, startTestBerth } from '../helpers/berth.ts';
import { launchBrowser, newContext, overflowsSideways, screenshot, signIn } from '../helpers/browser.ts';
import { pollCliLogin, startCliLogin } from '../../control-plane/services/cli-logins.ts';
import { createUser } from '../../control-plane/services/users.ts';

const PASSWORD = 'a long enough password';
const ADMIN = 'ada@example.com';
const STRANGER = 'stranger@example.com';
const HOSTILE = '<img src=x onerror=alert(1)>';

let t0: TestBerth;
let browser: Browser;
let context: BrowserContext;
let page: Page;
const dialogs: string[] = [];
/** The site the tests share, made through the dashboard by the first one. */
let site: { id: string; subdomain: string; url: string };

test.before(async () => {
  t0 = await startTestBerth();
  await createUser(t0.berth.deps, { email: ADMIN, accountId: t0.owner.id, role: 'ADMIN', password: PASSWORD });
  const other = await t0.newAccount();
  await createUser(t0.berth.deps, { email: STRANGER, accountId: other.id, role: 'ADMIN', password: PASSWORD });
  browser = await launchBrowser();
  context = await newContext(browser);
  page = await context.newPage();
  // A tenant string that ran as HTML would open an alert.
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
});

test.after.always(async () => {
  await browser?.close();
  await t0?.dispose();
});

test.afterEach(() => {
  if (dialogs.length > 0) throw new Error(`a dialog opened: ${dialogs.join(', ')}`);
});

const dashboard = (hash = '') => `${t0.url}/${hash}`;

test.serial('sign in, create a site, upload index.html with the file picker and read it at the site', async (t) => {
  await page.goto(`${t0.url}/login`);
  await screenshot(page, 'login');
  await signIn(page, t0.url, ADMIN, PASSWORD);
  t.is(new URL(page.url()).pathname, '/');
  await page.getByRole('heading', { name: 'Sites' }).waitFor();

  await page.getByLabel('Site name').fill('Handbook');
  await page.getByLabel('Subdomain').fill('handbook');
  await page.getByRole('button', { name: 'Create site' }).click();
  await page.getByRole('heading', { name: 'Handbook' }).waitFor();
  const siteId = /#\/sites\/([0-9a-f-]{36})/.exec(page.url())![1]!;
  site = { id: siteId, subdomain: 'handbook', url: `http://handbook.localhost:${t0.berth.port}/` };

  await page.getByRole('navigation', { name: 'Site' }).getByRole('link', { name: 'Files' }).click();
  await page.getByLabel('Upload to folder').fill('web/');
  await page.getByLabel('Choose files to upload').setInputFiles({
    name: 'index.html',
    mimeType: 'text/html',
    buffer: Buffer.from('<!doctype html><title>Docs</title><h1>Hello from the dashboard</h1>'),
  });
  await page.getByRole('list', { name: 'Uploads' }).getByText('uploaded').waitFor();
  t.is(
    await page.getByRole('progressbar', { name: 'Uploading web/index.html' }).getAttribute('value'),
    await page.getByRole('progressbar', { name: 'Uploading web/index.html' }).getAttribute('max'),
  );
  // A tenant's file name is text, never HTML.
  await page.getByLabel('Upload to folder').fill('notes/');
  await page
    .getByLabel('Choose files to upload')
    .setInputFiles({ name: `${HOSTILE}.txt`, mimeType: 'text/plain', buffer: Buffer.from('hostile') });
  await page.getByRole('list', { name: 'Uploads' }).getByText('uploaded').nth(1).waitFor();
  await page.getByRole('link', { name: 'notes/', exact: true }).click();
  await page.getByText(`${HOSTILE}.txt`, { exact: true }).waitFor();
  t.is(await page.locator('main img').count(), 0);
  await page.getByRole('link', { name: 'All files' }).click();
  await page.getByRole('link', { name: 'web/', exact: true }).click();
  await page.getByText('index.html', { exact: true }).waitFor();
  await screenshot(page, 'files');

  const visitor = await newContext(browser);
  const tab = await visitor.newPage();
  const res = await tab.goto(site.url);
  t.is(res?.status(), 200);
  await tab.getByRole('heading', { name: 'Hello from the dashboard' }).waitFor();
  await visitor.close();

  await page.goto(dashboard('#/sites'));
  await page.getByRole('link', { name: 'Handbook', exact: true }).waitFor();
  await screenshot(page, 'sites');
});

test.serial(
  'a PRIVATE site: a fresh browser meets the gate, signs in and reads the page; a non-member gets 403',
  async (t) => {
    await page.goto(dashboard(`#/sites/${site.id}`));
    await page.getByRole('button', { name: 'Make private' }).click();
    await page.getByRole('button', { name: 'Make public' }).waitFor();

    const member = await newContext(browser);
    const tab = await member.newPage();
    const gate = await tab.goto(`${site.url}index.html`);
    t.is(gate?.status(), 401);
    await tab.getByRole('link', { name: 'Sign in' }).click();
    await tab.getByLabel('Email').fill(ADMIN);
    await tab.getByLabel('Password').fill(PASSWORD);
    await tab.getByRole('button', { name: 'Sign in' }).click();
    await tab.getByRole('heading', { name: 'Hello from the dashboard' }).waitFor();
    t.is(new URL(tab.url()).host, new URL(site.url).host, 'back on the site’s own host');
    t.is(new URL(tab.url()).pathname, '/index.html', 'at the page first asked for');
    await member.close();

    const stranger = await newContext(browser);
    const other = await stranger.newPage();
    t.is((await other.goto(site.url))?.status(), 401);
    await other.getByRole('link', { name: 'Sign in' }).click();
    await other.getByLabel('Email').fill(STRANGER);
    await other.getByLabel('Password').fill(PASSWORD);
    const refused = other.waitForResponse((r) => r.url().startsWith(site.url) && r.status() === 403);
    await other.getByRole('button', { name: 'Sign in' }).click();
    await refused;
    await other.getByRole('heading', { name: 'Not your site' }).waitFor();
    t.is(await other.getByText('Hello from the dashboard').count(), 0);
    await stranger.close();
  },
);

test.serial('a WRITE key made in the dashboard works with the API', async (t) => {
  await page.goto(dashboard('#/keys'));
  await page.getByLabel('Key name').fill('CI deploys');
  await page.getByLabel('Permission').selectOption('WRITE');
  await page.getByRole('button', { name: 'Create key' }).click();
  const secret = await page.getByLabel('New API key').inputValue();
  t.regex(secret, /^berth_/);
  await page.getByRole('cell', { name: 'CI deploys', exact: true }).waitFor();
  await screenshot(page, 'keys');

  const api = got.extend({
    prefixUrl: t0.url,
    headers: { authorization: `Bearer ${secret}` },
    throwHttpErrors: false,
    retry: { limit: 0 },
    responseType: 'json',
  });
  const account = await api.get('v0/accounts/current');
  t.is(account.statusCode, 200);
  t.is((account.body as { id: string }).id, t0.owner.id);
  const written = await api.put(
    `v0/buckets/${(await t0.owner.api.get(`v0/sites/${site.id}`).json<{ bucketId: string }>()).bucketId}/objects/web/about.html`,
    {
      body: '<p>about</p>',
      headers: { 'content-type': 'text/html' },
    },
  );
  t.is(written.statusCode, 200, 'a WRITE key writes');
});

test.serial('reveal a secret: its value shows and the access log has a DASHBOARD entry naming the user', async (t) => {
  await page.goto(dashboard(`#/sites/${site.id}/secrets`));
  await page.getByLabel('Secret name').fill('PAYMENT_TOKEN');
  await page.getByLabel('Secret value').fill('tok_12345');
  await page.getByRole('button', { name: 'Save secret' }).click();
  await page.getByRole('button', { name: 'Reveal PAYMENT_TOKEN' }).click();
  t.is(await page.getByLabel('Value of PAYMENT_TOKEN').textContent(), 'tok_12345');

  const log = page.getByRole('table', { name: 'Secret access log' });
  await log.getByRole('cell', { name: 'DASHBOARD' }).waitFor();
  const row = log.getByRole('row').filter({ hasText: 'DASHBOARD' });
  t.regex((await row.textContent())!, /PAYMENT_TOKEN/);
  t.regex((await row.textContent())!, new RegExp(ADMIN));
  await page.getByRole('button', { name: 'Reveal PAYMENT_TOKEN' }).click();
  await screenshot(page, 'secrets');
});

test.serial('run queries and see the rows as a table, hostile values as text', async (t) => {
  await page.goto(dashboard(`#/sites/${site.id}/database`));
  await page.getByRole('button', { name: 'Create database' }).click();
  const run = async (sql: string) => {
    await page.getByLabel('SQL').fill(sql);
    await page.getByRole('button', { name: 'Run query' }).click();
  };
  await run('CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT, stars INTEGER)');
  await page.getByText('0 rows').waitFor();
  await run(`INSERT INTO notes (body, stars) VALUES ('first note', 3), ('${HOSTILE}', NULL)`);
  await page.getByText('2 changed').waitFor();
  await run('SELECT id, body, stars FROM notes ORDER BY id');
  const results = page.getByRole('table', { name: 'Query results' });
  await results.waitFor();
  t.deepEqual(await results.getByRole('columnheader').allTextContents(), ['id', 'body', 'stars']);
  t.deepEqual(await results.getByRole('row').nth(1).getByRole('cell').allTextContents(), ['1', 'first note', '3']);
  t.deepEqual(await results.getByRole('row').nth(2).getByRole('cell').allTextContents(), ['2', HOSTILE, 'NULL']);
  t.is(await results.locator('img').count(), 0);

  await run('SELECT nope FROM notes');
  await page.getByRole('alert').filter({ hasText: 'no such column' }).waitFor();
  await run('SELECT id, body, stars FROM notes ORDER BY id');
  await results.waitFor();
  await screenshot(page, 'database');
});

test.serial(
  'a berth login is approved in the dashboard, through sign-in first, with the code shown as in the terminal',
  async (t) => {
    const { login, pollToken } = await startCliLogin(t0.berth.deps, { machine: 'ada-laptop', address: '127.0.0.1' });
    t.deepEqual(await pollCliLogin(t0.berth.deps, pollToken), { status: 'PENDING' });
    const fresh = await newContext(browser);
    const tab = await fresh.newPage();
    // The link the CLI prints; signed out, the dashboard sends the browser to /login and comes back to it.
    await tab.goto(dashboard(`#/cli-login/${login.code}`));
    await tab.waitForURL(`${t0.url}/login`);
    await tab.getByLabel('Email').fill(ADMIN);
    await tab.getByLabel('Password').fill(PASSWORD);
    await tab.getByRole('button', { name: 'Sign in' }).click();
    await tab.getByRole('heading', { name: 'Approve a CLI sign-in' }).waitFor();
    t.is(await tab.getByLabel('Sign-in code').textContent(), login.code);
    await tab.getByText('ada-laptop').waitFor();
    await tab.getByRole('radio', { name: /WRITE/ }).check();
    await tab.getByRole('button', { name: 'Approve' }).click();
    await tab.getByRole('heading', { name: 'CLI sign-in approved' }).waitFor();
    const collected = await pollCliLogin(t0.berth.deps, pollToken);
    t.like(collected, { status: 'APPROVED', accountId: t0.owner.id, permission: 'WRITE' });
    await fresh.close();
  },
);

test.serial('files dropped on the upload box are uploaded into the folder shown', async (t) => {
  await page.goto(dashboard(`#/sites/${site.id}/files?prefix=web/`));
  await page.getByText('index.html', { exact: true }).waitFor();
  // What a drag from the desktop delivers: a DataTransfer holding files (built in the page).
  const dataTransfer = await page.evaluateHandle(`(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(['<p>dropped</p>'], 'dropped.html', { type: 'text/html' }));
    return dt;
  })()`);
  await page.getByRole('region', { name: 'Upload files' }).dispatchEvent('drop', { dataTransfer });
  await page.getByRole('list', { name: 'Uploads' }).getByText('uploaded').waitFor();
  await page.getByRole('cell', { name: 'dropped.html', exact: true }).waitFor();
  const stored = await t0.owner.api.get(
    `v0/buckets/${(await t0.owner.api.get(`v0/sites/${site.id}`).json<{ bucketId: string }>()).bucketId}/objects/web/dropped.html`,
    { responseType: 'text' },
  );
  t.is(stored.body, '<p>dropped</p>');
  t.regex(stored.headers['content-type']!, /^text\/html/);
});

test.serial(
  'Usage shows what the account stores; deleting an old version from a file’s history frees it; the database page shows its size and compacts',
  async (t) => {
    const { bucketId } = await t0.owner.api.get(`v0/sites/${site.id}`).json<{ bucketId: string }>();
    const write = (fill: number) =>
      t0.owner.api.put(`v0/buckets/${bucketId}/objects/web/big.bin`, { body: Buffer.alloc(300 * 1024, fill) });
    t.is((await write(1)).statusCode, 200);
    t.is((await write(2)).statusCode, 200);

    // The owner's account is on the platform-admin plan: no limit, so the page shows the bytes alone.
    const usedBytes = async () =>
      (await t0.owner.read.get('v0/accounts/current/usage').json<{ usage: { storage: { usedBytes: number } } }>()).usage
        .storage.usedBytes;
    const shown = async () => {
      await page.goto(dashboard('#/usage'));
      const card = page.getByRole('heading', { name: 'Storage' }).locator('..');
      await card.getByText('This account has no storage limit.', { exact: false }).waitFor();
      // What its database replicas take, beside.
      await card.getByText('Site database replicas (their history, for restores): ', { exact: false }).waitFor();
      return card.locator('.big-number').textContent();
    };
    const before = { bytes: await usedBytes(), text: await shown() };

    await page.goto(dashboard(`#/sites/${site.id}/files?prefix=web/`));
    await page.getByRole('button', { name: 'Versions of web/big.bin' }).click();
    // The confirmation is answered yes (a real dialog would count as a tenant string run as HTML).
    await page.evaluate('window.confirm = () => true');
    await page.getByRole('button', { name: /^Delete version / }).click();
    await page.getByText('freeing 300 KiB').waitFor();
    t.is(await usedBytes(), before.bytes - 300 * 1024);
    t.not(await shown(), before.text);

    await page.goto(dashboard(`#/sites/${site.id}/database`));
    await page.getByRole('meter', { name: 'Database size against its limit' }).waitFor();
    await page.getByText(/of 1\.0 GiB/).waitFor();
    await page.getByRole('button', { name: 'Compact' }).click();
    await page.getByText(/^Compacted: /).waitFor();
  },
);

test.serial('at a phone’s width the main pages do not scroll sideways', async (t) => {
  const phone = await newContext(browser, { width: 375, height: 740 });
  const small = await phone.newPage();
  await signIn(small, t0.url, ADMIN, PASSWORD);
  for (const hash of [
    '#/sites',
    `#/sites/${site.id}`,
    `#/sites/${site.id}/files?prefix=web/`,
    `#/sites/${site.id}/secrets`,
    `#/sites/${site.id}/database`,
    '#/keys',
  ]) {
    await small.goto(dashboard(hash));
    await small.locator('h1').first().waitFor();
    await small.waitForLoadState('networkidle');
    t.false(await overflowsSideways(small), `${hash} fits 375 px`);
  }
  await small.goto(dashboard('#/sites'));
  await small.getByRole('link', { name: 'Handbook', exact: true }).waitFor();
  await screenshot(small, 'phone-sites');
  await phone.close();
});

test.serial('sign out ends the session: the dashboard sends the browser to /login', async (t) => {
  await page.goto(dashboard('#/sites'));
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForURL(`${t0.url}/login`);
  await page.goto(dashboard('#/sites'));
  await page.waitForURL(`${t0.url}/login`);
  t.is(await page.getByRole('button', { name: 'Sign in' }).count(), 1);
});
