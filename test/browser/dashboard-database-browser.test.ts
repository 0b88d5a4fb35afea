// The database page's browser in a real browser (Debian's Chromium): two tables made through the API,
// one of 250 rows and one whose name and columns need quoting, listed with their columns and row
// counts (Berth's own tables not); the 250 rows paged through, sorted by a column, filtered by one,
// with long text cut and a BLOB shown as its size. Every read is the query API's, read-only, with the
// session's anti-forgery token; a MEMBER browses too, and the session's read-only query refuses a write.
import test from 'ava';
import type { Browser, BrowserContext, Page, Request } from 'playwright-core';
import { type TestBerth, json, startTestBerth } from '../helpers/berth.ts';
import { launchBrowser, newContext, signIn } from '../helpers/browser.ts';
import { type SiteWithDatabase, siteWithDatabase } from '../helpers/databases.ts';
import { until } from '../helpers/until.ts';
import { createUser } from '../../control-plane/services/users.ts';

const PASSWORD = 'a long enough password';
const ADMIN = 'ada@example.com';
const MEMBER = 'mel@example.com';
const TAGS = 'my "tags"';

let t0: TestBerth;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let db: SiteWithDatabase;
const dialogs: string[] = [];
const queries: Request[] = [];

test.before(async () => {
  t0 = await startTestBerth();
  await createUser(t0.berth.deps, { email: ADMIN, accountId: t0.owner.id, role: 'ADMIN', password: PASSWORD });
  await createUser(t0.berth.deps, { email: MEMBER, accountId: t0.owner.id, role: 'MEMBER', password: PASSWORD });
  db = await siteWithDatabase(t0.owner, { name: 'Shop', subdomain: 'shop' });
  const made = [
    await db.query('CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, score REAL, note TEXT, data BLOB)'),
    // Row 5 holds a long note and a BLOB; every other row a short note and no BLOB.
    await db.query(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 250)
       INSERT INTO items (id, name, score, note, data)
       SELECT i, 'item ' || i, i % 7, CASE WHEN i = 5 THEN ? ELSE 'n' || i END, CASE WHEN i = 5 THEN zeroblob(12) END FROM n`,
      ['x'.repeat(1000)],
    ),
    await db.query('CREATE TABLE "my ""tags""" ("la""bel" TEXT PRIMARY KEY, uses INTEGER NOT NULL) WITHOUT ROWID'),
    await db.query('INSERT INTO "my ""tags""" VALUES (?, ?), (?, ?), (?, ?)', ['red', 3, 'blue', 1, 'green', 2]),
  ];
  for (const res of made) if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  browser = await launchBrowser();
  context = await newContext(browser);
  page = await context.newPage();
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  page.on('request', (request) => {
    if (request.url().endsWith('/query')) queries.push(request);
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

/** The text of each cell of the rows shown, row by row. */
const shownRows = (tab: Page) =>
  tab
    .locator('table.rows-table tbody tr')
    .evaluateAll((rows) => rows.map((row) => [...row.querySelectorAll('td')].map((td) => td.textContent)));
const shownIds = async (tab: Page) => (await shownRows(tab)).map((cells) => Number(cells[0]));
const position = (tab: Page, text: string) => tab.locator('.pager .position', { hasText: text }).waitFor();

test.serial('the tables with their columns and row counts; Berth’s own tables are not listed', async (t) => {
  const own = await db.query("SELECT name FROM sqlite_schema WHERE type = 'table' AND name LIKE '\\_%' ESCAPE '\\'");
  t.deepEqual(
    own.body.result[0]!.results.map((r) => r.name).sort(),
    ['_berth_migrations', '_litestream_lock', '_litestream_seq'],
    'the database holds the ledger and the replicator’s tables',
  );
  await page.goto(databasePage());
  const list = page.locator('table.tables-table tbody tr');
  await list.first().waitFor();
  const tables = await list.evaluateAll((rows) =>
    rows.map((row) => ({
      name: row.querySelector('th')!.textContent,
      columns: [...row.querySelectorAll('li')].map((li) => li.textContent),
      rows: row.querySelector('td[data-label=Rows]')!.textContent,
    })),
  );
  t.deepEqual(tables, [
    {
      name: 'items',
      columns: ['id INTEGER primary key', 'name TEXT not null', 'score REAL', 'note TEXT', 'data BLOB'],
      rows: '250',
    },
    // A WITHOUT ROWID table's key is NOT NULL, as SQLite reports it.
    { name: TAGS, columns: ['la"bel TEXT primary key not null', 'uses INTEGER not null'], rows: '3' },
  ]);
});

test.serial('250 rows a page at a time, both ways, the position shown', async (t) => {
  await page.getByRole('button', { name: 'Browse the rows of items' }).click();
  await position(page, 'Rows 1–50 of 250 · page 1 of 5');
  const ids = await shownIds(page);
  t.is(ids.length, 50);
  t.deepEqual([ids[0], ids.at(-1)], [1, 50]);
  t.true(await page.getByRole('button', { name: 'Previous page' }).isDisabled());
  for (let p = 2; p <= 5; p++) {
    await page.getByRole('button', { name: 'Next page' }).click();
    await position(page, `Rows ${(p - 1) * 50 + 1}–${p * 50} of 250 · page ${p} of 5`);
    const shown = await shownIds(page);
    t.deepEqual([shown[0], shown.at(-1), shown.length], [(p - 1) * 50 + 1, p * 50, 50], `page ${p}`);
  }
  t.true(await page.getByRole('button', { name: 'Next page' }).isDisabled(), 'the last page ends at 250');
  await page.getByRole('button', { name: 'Previous page' }).click();
  await position(page, 'Rows 151–200 of 250 · page 4 of 5');
  t.deepEqual((await shownIds(page)).slice(0, 1), [151]);
});

test.serial('long text is cut, a BLOB is shown as its size, NULL as NULL', async (t) => {
  await page.getByRole('button', { name: 'Browse the rows of items' }).click();
  await position(page, 'Rows 1–50 of 250 · page 1 of 5');
  const rows = await shownRows(page);
  t.deepEqual(rows[4], ['5', 'item 5', '5.0', `${'x'.repeat(200)}… (1,000 characters)`, 'BLOB, 12 B']);
  t.deepEqual(rows[0], ['1', 'item 1', '1.0', 'n1', 'NULL']);
});

test.serial('sorted by a column, ascending then descending', async (t) => {
  await page.getByRole('button', { name: 'Sort by score, ascending' }).click();
  await page.locator('th[aria-sort=ascending]', { hasText: 'score' }).waitFor();
  t.deepEqual((await shownRows(page))[0], ['7', 'item 7', '0.0', 'n7', 'NULL'], 'score 0 first, then by id');
  await page.getByRole('button', { name: 'Sort by score, descending' }).click();
  await page.locator('th[aria-sort=descending]', { hasText: 'score' }).waitFor();
  t.deepEqual((await shownRows(page))[0], ['6', 'item 6', '6.0', 'n6', 'NULL']);
  await position(page, 'Rows 1–50 of 250 · page 1 of 5');
  await page.getByRole('button', { name: 'Next page' }).click();
  await position(page, 'Rows 51–100 of 250 · page 2 of 5');
  const byScore = Array.from({ length: 250 }, (_, i) => i + 1).sort((a, b) => (b % 7) - (a % 7) || a - b);
  t.deepEqual(await shownIds(page), byScore.slice(50, 100), 'the sort holds across pages, ties by id');
});

test.serial('filtered by a column: equals, contains (a wildcard is matched as itself), cleared', async (t) => {
  const filter = async (column: string, match: string, value: string) => {
    await page.getByLabel('Filter column').selectOption(column);
    await page.getByLabel('Match').selectOption(match);
    await page.getByLabel('Value').fill(value);
    await page.getByRole('button', { name: 'Filter', exact: true }).click();
  };
  await filter('name', 'equals', 'item 42');
  await position(page, 'Rows 1–1 of 1 · page 1 of 1 (filtered)');
  t.deepEqual(await shownIds(page), [42]);

  await filter('id', 'equals', '250');
  await until(async () => (await shownIds(page))[0] === 250, 'the rows filtered by id');
  await position(page, 'Rows 1–1 of 1 · page 1 of 1 (filtered)');
  t.deepEqual(await shownIds(page), [250], 'a number typed matches an INTEGER column');

  await filter('name', 'contains', '24');
  await position(page, 'Rows 1–13 of 13 · page 1 of 1 (filtered)');
  t.deepEqual(
    (await shownIds(page)).sort((a, b) => a - b),
    [24, 124, 224, 240, 241, 242, 243, 244, 245, 246, 247, 248, 249],
  );
  const scores = (await shownRows(page)).map((cells) => Number(cells[2]));
  t.deepEqual(
    scores,
    [...scores].sort((a, b) => b - a),
    'still sorted by score, descending',
  );

  await filter('name', 'contains', '_');
  await position(page, 'No rows (filtered)');
  await page.getByText('No rows match the filter.').waitFor();

  await page.getByRole('button', { name: 'Clear filter' }).click();
  await position(page, 'Rows 1–50 of 250 · page 1 of 5');
  t.pass();
});

test.serial('names that need quoting are quoted: the table of three rows in its key’s order', async (t) => {
  await page.getByRole('button', { name: `Browse the rows of ${TAGS}` }).click();
  await position(page, 'Rows 1–3 of 3 · page 1 of 1');
  t.deepEqual(await shownRows(page), [
    ['blue', '1'],
    ['green', '2'],
    ['red', '3'],
  ]);
  await page.getByRole('button', { name: 'Sort by uses, ascending' }).click();
  await page.getByRole('button', { name: 'Sort by uses, descending' }).click();
  await page.locator('th[aria-sort=descending]', { hasText: 'uses' }).waitFor();
  t.deepEqual((await shownRows(page))[0], ['red', '3']);
});

test.serial('every read went to the query API, read-only, with the session’s anti-forgery token', async (t) => {
  t.true(queries.length >= 10, `${queries.length} queries`);
  for (const request of queries) {
    t.is(request.method(), 'POST');
    t.is(new URL(request.url()).pathname, `/${db.base}/query`);
    t.is(request.postDataJSON().readOnly, true, request.postData() ?? '');
    t.truthy(request.headers()['x-csrf-token']);
  }
});

test.serial('a MEMBER browses too; the session’s read-only query refuses a write', async (t) => {
  const member = await newContext(browser);
  const tab = await member.newPage();
  await signIn(tab, t0.url, MEMBER, PASSWORD);
  await tab.goto(databasePage());
  await tab.getByRole('button', { name: 'Browse the rows of items' }).click();
  await position(tab, 'Rows 1–50 of 250 · page 1 of 5');
  t.deepEqual((await shownIds(tab)).slice(0, 2), [1, 2]);

  const refused = await tab.evaluate(async (path) => {
    const { csrfToken } = (await (await fetch('/session')).json()) as { csrfToken: string };
    const res = await fetch(`/${path}/query`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-csrf-token': csrfToken },
      body: JSON.stringify({ sql: 'DELETE FROM items', readOnly: true }),
    });
    return { status: res.status, body: (await res.json()) as { errors: Array<{ code: string }> } };
  }, db.base);
  t.is(refused.status, 400);
  t.is(refused.body.errors[0]?.code, 'statement_not_allowed');
  t.deepEqual((await db.query('SELECT count(*) AS n FROM items')).body.result[0]!.results, [{ n: 250 }]);
  await member.close();
});

test.serial(
  'a deployment’s page names its preview’s branch of the database and opens its tables, read-only',
  async (t) => {
    const declared = await t0.owner.api.post(`v0/sites/${db.site.id}/deployments`, {
      json: { files: [{ path: 'web/index.html', content: 'next', contentType: 'text/html' }] },
    });
    const deployment = json<{ deployment: { id: string } }>(declared).deployment;
    const wrote = await t0.owner.api.post(`${db.base}/query`, {
      json: { sql: "INSERT INTO items (id, name) VALUES (1000, 'only on the branch')", branch: deployment.id },
    });
    t.is(wrote.statusCode, 200, JSON.stringify(wrote.body));
    await page.goto(`${t0.url}/#/sites/${db.site.id}/deployments/${deployment.id}`);
    await page.getByRole('link', { name: 'Browse its tables' }).click();
    await page.getByRole('heading', { name: 'Tables of the branch' }).waitFor();
    t.true(await page.getByText('Read-only: browsing never changes the branch.').isVisible());
    const counts = await page
      .locator('table.tables-table tbody tr')
      .evaluateAll((rows) => rows.map((row) => row.querySelector('td[data-label=Rows]')!.textContent));
    t.deepEqual(counts, ['251', '3'], 'the branch’s rows, its own among them');
    const last = queries.at(-1)!;
    t.like(last.postDataJSON(), { readOnly: true, branch: deployment.id });
    t.deepEqual(
      (await db.query('SELECT count(*) AS n FROM items')).body.result[0]!.results,
      [{ n: 250 }],
      'the database itself never saw it',
    );
  },
);
