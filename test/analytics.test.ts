// Per-site analytics: known traffic gives exact totals (requests by status class, function calls and
// errors, top paths and referrer hosts), reads are the account's own, a restart keeps what was
// counted, and minutes older than two days fold into hours, hours older than 90 days into days, with
// the same totals (on a clock the test moves).
import test from 'ava';
import { until } from './helpers/until.ts';
import {
  type TestAccount,
  type TestBerth,
  apiClient,
  createSite,
  json,
  putFile,
  startTestBerth,
} from './helpers/berth.ts';
import { startBerth } from '../control-plane/server.ts';
import {
  DAY,
  HOUR,
  MINUTE,
  addMinutesToHours,
  foldAged,
  readTallies,
  writeTallies,
} from '../control-plane/analytics/store.ts';
import { newTally } from '../control-plane/analytics/tally.ts';
import { eachMetadataBackend } from './helpers/each-adapter.ts';
import { seedSite } from './helpers/metadata-rows.ts';

const WORK = `export default function (req: Request): Response {
  if (new URL(req.url).searchParams.has('fail')) throw new Error('asked to fail');
  return new Response('done');
}
`;

interface Counts {
  requests: number;
  status: Record<'2xx' | '3xx' | '4xx' | '5xx', number>;
  bytesOut: number;
  functionInvocations: number;
  functionErrors: number;
  coldStarts: number;
  p50Ms: number | null;
  p95Ms: number | null;
  functionP50Ms: number | null;
}
interface Analytics {
  from: string;
  to: string;
  step: string;
  totals: Counts;
  series: Array<Counts & { at: string }>;
  topPaths: Array<{ path: string; requests: number }>;
  topReferrers: Array<{ host: string; requests: number }>;
}

const PAGE = '<h1>Hello</h1>'.repeat(50);

async function siteWithWork(account: TestAccount) {
  const site = await createSite(account, { name: 'Counted' });
  await putFile(account, site.bucketId, 'web/index.html', PAGE, 'text/html');
  await putFile(account, site.bucketId, 'api/work.ts', WORK, 'text/typescript');
  return site;
}

/** 37 page loads (5 of them linked from another site), 5 not found, 11 function calls of which 3 throw. */
async function knownTraffic(h: TestBerth, subdomain: string): Promise<void> {
  const site = h.site(subdomain);
  for (let i = 0; i < 37; i++) {
    const headers: Record<string, string> =
      i < 5
        ? { referer: 'https://news.example.com/item?id=1' }
        : i < 8
          ? { referer: `http://${subdomain}.localhost/other.html` }
          : {};
    const res = await site.get('index.html', { headers });
    if (res.statusCode !== 200) throw new Error(`page load answered ${res.statusCode}`);
  }
  for (let i = 0; i < 5; i++) {
    const res = await site.get(`missing-${i}.html`);
    if (res.statusCode !== 404) throw new Error(`missing page answered ${res.statusCode}`);
  }
  for (let i = 0; i < 11; i++) {
    const res = await site.get(i < 3 ? 'api/work?fail=1' : 'api/work');
    if (res.statusCode !== (i < 3 ? 500 : 200)) throw new Error(`function call answered ${res.statusCode}`);
  }
}

test('known traffic gives exact totals, series, top paths and referrer hosts', async (t) => {
  const h = await startTestBerth();
  t.teardown(() => h.dispose());
  const site = await siteWithWork(h.owner);
  await knownTraffic(h, site.subdomain);

  const res = await h.owner.read.get(`v0/sites/${site.id}/analytics`);
  t.is(res.statusCode, 200);
  const body = json<Analytics>(res);
  t.is(body.step, 'hour');
  t.is(body.series.length, 25, 'the last 24 hours by the hour, the current one whole');
  const { totals } = body;
  t.is(totals.requests, 53);
  t.deepEqual(totals.status, { '2xx': 45, '3xx': 0, '4xx': 5, '5xx': 3 });
  t.is(totals.functionInvocations, 11);
  t.is(totals.functionErrors, 3);
  t.is(totals.coldStarts, 1);
  t.true(totals.bytesOut > 37 * PAGE.length, `bytes out: ${totals.bytesOut}`);
  t.true(totals.p50Ms !== null && totals.p50Ms > 0);
  t.true(totals.functionP50Ms !== null && totals.functionP50Ms > 0);
  t.is(
    body.series.reduce((sum, point) => sum + point.requests, 0),
    53,
    'the series adds up to the totals',
  );
  t.deepEqual(body.topPaths.slice(0, 2), [
    { path: '/index.html', requests: 37 },
    { path: '/api/work', requests: 11 },
  ]);
  t.deepEqual(body.topReferrers, [{ host: 'news.example.com', requests: 5 }], 'the site’s own pages are not referrers');

  const minutes = json<Analytics>(await h.owner.read.get(`v0/sites/${site.id}/analytics?step=minute`));
  t.is(minutes.series.length, 24 * 60 + 1);
  t.is(minutes.totals.requests, 53);

  // The account-wide form: its sites, busiest first.
  const quiet = await createSite(h.owner, { name: 'Quiet' });
  await putFile(h.owner, quiet.bucketId, 'web/index.html', 'quiet', 'text/html');
  t.is((await h.site(quiet.subdomain).get('index.html')).statusCode, 200);
  const account = json<{ totals: Counts; sites: Array<{ site: { id: string }; totals: Counts }> }>(
    await h.owner.read.get(`v0/accounts/${h.owner.id}/analytics`),
  );
  t.is(account.totals.requests, 54);
  t.deepEqual(
    account.sites.map((s) => [s.site.id, s.totals.requests]),
    [
      [site.id, 53],
      [quiet.id, 1],
    ],
  );
});

test('analytics are the account’s own, and a bad range is refused with a reason', async (t) => {
  const h = await startTestBerth();
  t.teardown(() => h.dispose());
  const site = await siteWithWork(h.owner);
  const other = await h.newAccount();

  const foreign = await other.read.get(`v0/sites/${site.id}/analytics`);
  t.is(foreign.statusCode, 404);
  t.is(json(foreign).error.code, 'not_found');
  const foreignAccount = await other.read.get(`v0/accounts/${h.owner.id}/analytics`);
  t.is(foreignAccount.statusCode, 404);
  t.is(json(foreignAccount).error.code, 'not_found');
  t.is((await h.anonymous.get(`v0/sites/${site.id}/analytics`)).statusCode, 401);

  for (const query of [
    'step=week',
    'from=yesterday',
    'from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z',
    'from=2026-01-01T00:00:00Z&to=2026-11-01T00:00:00Z&step=minute',
  ]) {
    const res = await h.owner.read.get(`v0/sites/${site.id}/analytics?${query}`);
    t.is(res.statusCode, 400, query);
    t.is(json(res).error.code, 'invalid_request', query);
  }
});

test('a restart keeps what was counted before it', async (t) => {
  const h = await startTestBerth();
  t.teardown(() => h.dispose());
  const site = await siteWithWork(h.owner);
  for (let i = 0; i < 4; i++) t.is((await h.site(site.subdomain).get('index.html')).statusCode, 200);
  await h.berth.close();
  const again = await startBerth(h.config);
  t.teardown(() => again.close());
  const body = json<Analytics>(await apiClient(again.url, h.owner.readKey).get(`v0/sites/${site.id}/analytics`));
  t.is(body.totals.requests, 4);
});

test('minutes older than two days fold into hours, hours older than 90 days into days, with the same totals', async (t) => {
  let clock = Date.parse('2026-08-20T10:17:30Z');
  const h = await startTestBerth({}, { now: () => new Date(clock) });
  t.teardown(() => h.dispose());
  const site = await siteWithWork(h.owner);
  const pages = h.site(site.subdomain);
  for (let i = 0; i < 3; i++) t.is((await pages.get('index.html')).statusCode, 200);
  clock += 60_000;
  for (let i = 0; i < 2; i++) t.is((await pages.get('missing.html')).statusCode, 404);

  const read = async (query: string) =>
    json<Analytics>(await h.owner.read.get(`v0/sites/${site.id}/analytics?${query}`));
  const around = 'from=2026-08-20T10:00:00Z&to=2026-08-20T11:00:00Z&step=minute';
  const nonZero = (body: Analytics) => body.series.filter((p) => p.requests > 0).map((p) => [p.at, p.requests]);

  let body = await read(around);
  t.deepEqual(nonZero(body), [
    ['2026-08-20T10:17:00.000Z', 3],
    ['2026-08-20T10:18:00.000Z', 2],
  ]);

  clock += 49 * 3600_000;
  body = await read(around);
  t.deepEqual(nonZero(body), [['2026-08-20T10:00:00.000Z', 5]], 'one row for the hour, at its start');
  t.deepEqual(body.totals.status, { '2xx': 3, '3xx': 0, '4xx': 2, '5xx': 0 });
  t.deepEqual(body.topPaths, [
    { path: '/index.html', requests: 3 },
    { path: '/missing.html', requests: 2 },
  ]);

  clock += 91 * 24 * 3600_000;
  body = await read('from=2026-08-20T00:00:00Z&to=2026-08-21T00:00:00Z&step=hour');
  t.deepEqual(nonZero(body), [['2026-08-20T00:00:00.000Z', 5]], 'one row for the day, at its start');
  t.is(body.totals.requests, 5);

  clock += 731 * 24 * 3600_000;
  body = await read('from=2026-08-20T00:00:00Z&to=2026-08-21T00:00:00Z&step=hour');
  t.is(body.totals.requests, 0, 'days older than two years are removed');
});

test('account analytics read a row per site and hour for whole hours, and minutes only at the edges, with the minutes’ totals', async (t) => {
  const h = await startTestBerth();
  t.teardown(() => h.dispose());
  const sites = [await createSite(h.owner), await createSite(h.owner), await createSite(h.owner)];
  const ids = sites.map((site) => site.id);
  const now = Math.floor(Date.now() / 1000);
  const end = Math.floor(now / HOUR) * HOUR;
  const start = end - 6 * HOUR;
  // Six hours of minutes of each site, written ten minutes at a time as a node's flushes write them.
  const minutes = ids.flatMap((siteId, s) =>
    Array.from({ length: 360 }, (_, i) => {
      const tally = newTally();
      tally.requests = 1 + ((i + s) % 3);
      tally.status[0] = tally.requests;
      return { siteId, at: start + i * MINUTE, period: MINUTE, tally };
    }),
  );
  for (let at = start; at < end; at += 10 * MINUTE)
    await writeTallies(
      h.berth.deps.db,
      minutes.filter((m) => m.at >= at && m.at < at + 10 * MINUTE),
    );
  const sumOf = (list: Array<{ tally: { requests: number } }>) => list.reduce((sum, m) => sum + m.tally.requests, 0);
  const iso = (seconds: number) => new Date(seconds * 1000).toISOString();

  const body = json<{ totals: Counts; sites: Array<{ site: { id: string }; totals: Counts }> }>(
    await h.owner.read.get(`v0/accounts/${h.owner.id}/analytics?from=${iso(start)}&to=${iso(end)}&step=hour`),
  );
  t.is(body.totals.requests, sumOf(minutes));
  for (const id of ids)
    t.is(body.sites.find((s) => s.site.id === id)!.totals.requests, sumOf(minutes.filter((m) => m.siteId === id)));

  // What the account's read reads: a row per site and hour, not 60.
  const whole = await readTallies(h.berth.deps.db, ids, start, end, HOUR, now);
  t.true(whole.length <= ids.length * 6, `${whole.length} rows read for 3 sites and 6 hours`);
  t.is(sumOf(whole), sumOf(minutes));
  // A range cut mid-hour: the partial hours' minutes, and the whole hours between them.
  const from = start + 30 * MINUTE;
  const to = end - 15 * MINUTE;
  const cut = await readTallies(h.berth.deps.db, ids, from, to, HOUR, now);
  t.is(cut.length, ids.length * (30 + 4 + 45), 'the edges’ minutes and four hours of each site');
  t.is(sumOf(cut), sumOf(minutes.filter((m) => m.at >= from && m.at < to)));
});

test('counting requests leaves the server’s clock on time, and they count in the minute they came', async (t) => {
  const h = await startTestBerth();
  t.teardown(() => h.dispose());
  const site = await siteWithWork(h.owner);
  // What the request hook does for each answered request, as many times as a busy node does in seconds.
  const { deps } = h.berth;
  const before = Date.now();
  for (let i = 0; i < 20_000; i++) deps.analytics.request(site.id, 200, 1024, 1, '/index.html', null);
  const after = Date.now();
  const ahead = deps.now().getTime() - Date.now();
  t.true(ahead < 1000, `the server's clock is ${ahead} ms ahead of the real one`);

  const minute = (ms: number) => new Date(Math.floor(ms / 60_000) * 60_000).toISOString();
  // A read writes this node's counts first; one whose write failed (a loaded metadata server) keeps them
  // for the next, as the collector does for every batch.
  const body = await until(async () => {
    const read = json<Analytics>(await h.owner.read.get(`v0/sites/${site.id}/analytics?step=minute`));
    return read.totals.requests > 0 && read;
  }, 'the counts to be stored');
  t.is(body.totals.requests, 20_000);
  const counted = body.series.filter((p) => p.requests > 0).map((p) => p.at);
  t.true(
    counted.every((at) => at === minute(before) || at === minute(after)),
    `counted in ${counted.join(', ')}, sent in ${minute(before)}–${minute(after)}`,
  );
});

// Nodes share the metadata on PostgreSQL only (on SQLite one server owns it, by the data dir's lock).
for (const backend of eachMetadataBackend().filter((b) => b.name === 'postgres'))
  test(`${backend.name}: two nodes folding the same aged minutes at once fold each minute once`, async (t) => {
    const opened = await backend.open();
    t.teardown(() => opened.close());
    const other = await opened.another();
    const { siteId } = await seedSite(opened.metadata.db);
    const now = Math.floor(Date.parse('2026-11-26T12:00:00Z') / 1000);
    // 12,000 rows (several of a fold's batches) over six hours of minutes three days old, 7 requests each.
    const start = now - 3 * DAY;
    const minutes = Array.from({ length: 12_000 }, (_, i) => {
      const tally = newTally();
      tally.requests = 7;
      tally.status[0] = 7;
      return { siteId, at: start + (i % 360) * MINUTE, period: MINUTE, tally };
    });
    await writeTallies(opened.metadata.db, minutes);

    await Promise.all([foldAged(opened.metadata.db, now), foldAged(other.db, now)]);

    const rows = await readTallies(opened.metadata.db, [siteId], start - DAY, now, HOUR, now);
    t.is(
      rows.reduce((sum, row) => sum + row.tally.requests, 0),
      12_000 * 7,
      'every request counted once',
    );
    t.true(
      rows.every((row) => row.period === HOUR),
      'only hour rows are left',
    );
  });

for (const backend of eachMetadataBackend().filter((b) => b.name === 'postgres'))
  test(`${backend.name}: two nodes writing minutes of the same hours at once leave hours that hold every minute`, async (t) => {
    const opened = await backend.open();
    t.teardown(() => opened.close());
    const other = await opened.another();
    const { siteId } = await seedSite(opened.metadata.db);
    const now = Math.floor(Date.parse('2026-11-26T12:00:00Z') / 1000);
    const start = now - 3 * HOUR;
    const minutesOf = (requests: number) =>
      Array.from({ length: 180 }, (_, i) => {
        const tally = newTally();
        tally.requests = requests;
        return { siteId, at: start + i * MINUTE, period: MINUTE, tally };
      });
    // Each node's flushes, a minute at a time, side by side.
    const flushes = (db: typeof other.db, requests: number) =>
      minutesOf(requests).reduce((done, minute) => done.then(() => writeTallies(db, [minute])), Promise.resolve());
    await Promise.all([flushes(opened.metadata.db, 2), flushes(other.db, 3)]);

    const hours = await readTallies(opened.metadata.db, [siteId], start, now, HOUR, now);
    t.true(hours.every((row) => row.period === HOUR));
    t.is(
      hours.reduce((sum, row) => sum + row.tally.requests, 0),
      180 * 5,
      'every minute of both nodes in its hour, once',
    );
  });

for (const backend of eachMetadataBackend())
  test(`${backend.name}: the minutes kept before hours held them are added to their hours once`, async (t) => {
    const opened = await backend.open();
    t.teardown(() => opened.close());
    const { db } = opened.metadata;
    const { siteId } = await seedSite(db);
    const now = Math.floor(Date.parse('2026-11-26T12:00:00Z') / 1000);
    const start = now - 2 * HOUR;
    // Minute rows as an earlier Berth wrote them: no hour row holds them.
    const row = (at: number) => {
      const tally = newTally();
      tally.requests = 4;
      return { siteId, at, period: MINUTE, tally };
    };
    const before = Array.from({ length: 120 }, (_, i) => row(start + i * MINUTE));
    await writeTallies(db, before);
    await db('site_analytics').where({ period: HOUR }).delete();
    t.is((await readTallies(db, [siteId], start, now, HOUR, now)).length, 0, 'no hour holds them yet');

    await addMinutesToHours(db);
    const hours = await readTallies(db, [siteId], start, now, HOUR, now);
    t.is(hours.length, 2);
    t.is(
      hours.reduce((sum, r) => sum + r.tally.requests, 0),
      120 * 4,
    );
    t.is(
      (await readTallies(db, [siteId], start, now, MINUTE, now)).reduce((sum, r) => sum + r.tally.requests, 0),
      120 * 4,
      'read by the minute, the same totals',
    );
  });
