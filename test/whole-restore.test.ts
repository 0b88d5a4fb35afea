// A site restored whole to one instant: its files and functions from its history and its database from
// its replica, to the same second, as one deployment that records the database's restore, shown first
// by the snapshot with `database`, and undone by restoring whole to the moment just before. Through
// the REST API, the site's host and the query API.
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { type TestBerth, json, startTestBerth } from './helpers/berth.ts';
import { siteWithDatabase } from './helpers/databases.ts';
import { typeOf } from './helpers/deployments.ts';
import { until } from './helpers/until.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

type Site = Awaited<ReturnType<typeof siteWithDatabase>>;

const INIT = { name: '0001_notes.sql', sql: 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);' };
const PINNED = { name: '0002_pinned.sql', sql: 'ALTER TABLE notes ADD COLUMN pinned INTEGER;' };

async function deploy(site: Site, page: string, migrations: Array<{ name: string; sql: string }>) {
  const declared = await t0.owner.api.post(`v0/sites/${site.site.id}/deployments`, {
    json: { files: [{ path: 'web/index.html', content: page, contentType: typeOf('index.html') }], migrations },
  });
  if (declared.statusCode !== 201) throw new Error(JSON.stringify(declared.body));
  const id = json<{ deployment: { id: string } }>(declared).deployment.id;
  const published = await t0.owner.api.post(`v0/sites/${site.site.id}/deployments/${id}/publish`);
  if (published.statusCode !== 200) throw new Error(JSON.stringify(published.body));
}

/**
 * Waits until the database's replica holds every write made up to now (time travel gives back what the
 * replica held at a moment: a row must be shipped before the moment restored to).
 */
async function replicated(site: Site): Promise<void> {
  const now = Date.now();
  await until(async () => {
    const points = json<{ latest: string | null }>(await t0.owner.read.get(`${site.base}/restore-points`));
    return points.latest !== null && Date.parse(points.latest) > now;
  }, 'the writes to reach the replica');
}

const second = (ms: number) => new Date(Math.floor(ms / 1000) * 1000).toISOString();
const notes = async (site: Site) =>
  (await site.query('SELECT body FROM notes ORDER BY id')).body.result[0]!.results.map((row) => row.body);
const columns = async (site: Site) =>
  (await site.query("SELECT name FROM pragma_table_info('notes') ORDER BY cid")).body.result[0]!.results.map(
    (row) => row.name,
  );

interface Restored {
  deployment: {
    kind: string;
    restoredAt: string;
    databaseRestore: { restoredTo: string; restoredFrom: string } | null;
  };
}

test('a whole restore between two deployments and two sets of rows gives exactly that instant’s files and rows, then undo gives back the present', async (t) => {
  const site = await siteWithDatabase(t0.owner);
  const live = t0.site(site.site.subdomain);
  await deploy(site, 'one', [INIT]);
  await site.query("INSERT INTO notes (body) VALUES ('a')");
  await replicated(site);
  await sleep(1100);
  const instant = Date.now();
  await sleep(1100);
  await deploy(site, 'two', [INIT, PINNED]);
  await site.query("INSERT INTO notes (body) VALUES ('b')");
  await replicated(site);

  // The pair, shown before anything changes.
  const snapshot = json<{
    snapshot: {
      files: number;
      database: { at: string; restorable: boolean; tables: Array<{ name: string; rowsThen: number; rowsNow: number }> };
    };
  }>(
    await t0.owner.read.get(`v0/sites/${site.site.id}/snapshot`, {
      searchParams: { at: new Date(instant).toISOString(), database: 'true' },
    }),
  ).snapshot;
  t.is(snapshot.files, 1);
  t.like(snapshot.database, { at: second(instant), restorable: true });
  t.deepEqual(snapshot.database.tables, [{ name: 'notes', rowsThen: 1, rowsNow: 2 }]);
  t.deepEqual(await notes(site), ['a', 'b'], 'nothing changed yet');

  const restored = await t0.owner.api.post(`v0/sites/${site.site.id}/restore`, {
    json: { at: new Date(instant).toISOString(), database: true },
  });
  t.is(restored.statusCode, 200, JSON.stringify(restored.body));
  const deployment = json<Restored>(restored).deployment;
  t.is(deployment.kind, 'RESTORE');
  t.is(deployment.restoredAt, second(instant));
  t.is(deployment.databaseRestore!.restoredTo, second(instant));
  t.is((await live.get('')).body, 'one');
  t.deepEqual(await notes(site), ['a']);
  t.deepEqual(await columns(site), ['id', 'body'], 'the schema as it was then, before its second migration');

  // Undone by restoring whole to the moment just before, once the replica holds it.
  await replicated(site);
  const undone = await t0.owner.api.post(`v0/sites/${site.site.id}/restore`, {
    json: { at: deployment.databaseRestore!.restoredFrom, database: true },
  });
  t.is(undone.statusCode, 200, JSON.stringify(undone.body));
  t.is((await live.get('')).body, 'two');
  t.deepEqual(await notes(site), ['a', 'b']);
  t.deepEqual(await columns(site), ['id', 'body', 'pinned']);
  const history = json<{ deployments: Array<{ kind: string; databaseRestore: unknown }> }>(
    await t0.owner.read.get(`v0/sites/${site.site.id}/deployments`),
  ).deployments;
  t.deepEqual(
    history.slice(0, 2).map((d) => [d.kind, d.databaseRestore !== null]),
    [
      ['RESTORE', true],
      ['RESTORE', true],
    ],
    'each whole restore is one entry of the site’s history, its database’s restore recorded with it',
  );
});

test('a moment the database’s history does not hold is 422 before_history naming the earliest moment both hold, and nothing changes', async (t) => {
  const site = await siteWithDatabase(t0.owner);
  await deploy(site, 'one', [INIT]);
  await site.query("INSERT INTO notes (body) VALUES ('kept')");
  await replicated(site);
  const points = json<{ earliest: string }>(await t0.owner.read.get(`${site.base}/restore-points`));
  const refused = await t0.owner.api.post(`v0/sites/${site.site.id}/restore`, {
    json: { at: new Date(Date.now() - 86_400_000).toISOString(), database: true },
  });
  t.is(refused.statusCode, 422);
  const error = json<{ error: { code: string; message: string; details: { availableFrom: string } } }>(refused).error;
  t.is(error.code, 'before_history');
  t.true(error.details.availableFrom >= points.earliest, JSON.stringify(error));
  t.regex(error.message, /restored whole to a moment from/);
  // The snapshot says the same before anything is tried.
  const snapshot = await t0.owner.read.get(`v0/sites/${site.site.id}/snapshot`, {
    searchParams: { at: error.details.availableFrom, database: 'true' },
  });
  t.is(snapshot.statusCode, 200, JSON.stringify(snapshot.body));
  t.deepEqual(await notes(site), ['kept']);
  t.is((await t0.site(site.site.subdomain).get('')).body, 'one');
});

test('a site without a database cannot be restored with one: 404, and nothing changes', async (t) => {
  const created = await t0.owner.api.post('v0/sites', { json: { accountId: t0.owner.id, name: 'No database' } });
  const siteId = json<{ id: string }>(created).id;
  const refused = await t0.owner.api.post(`v0/sites/${siteId}/restore`, {
    json: { at: new Date().toISOString(), database: true },
  });
  t.is(refused.statusCode, 404);
  t.is(json<{ error: { code: string } }>(refused).error.code, 'not_found');
});
