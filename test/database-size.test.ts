// The size limit of site databases, enforced by SQLite itself, and space coming back: a tenant that
// tries to pass the limit is refused with database_full (DATABASE_FULL to ctx.db) and loses nothing it
// had, another site keeps writing, deleted rows give their space back, and compaction rewrites a
// database made before incremental auto-vacuum.
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import Database from 'better-sqlite3';
import { type TestBerth, createSite, deployFixture, json, startTestBerth } from './helpers/berth.ts';
import { type DatabaseRecord, type Envelope, siteWithDatabase } from './helpers/databases.ts';
import { until } from './helpers/until.ts';

const MIB = 1024 * 1024;
const LIMIT = 2 * MIB;

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth({ siteDatabaseMaxBytes: LIMIT });
});
test.after.always(async () => {
  await t0?.dispose();
});

/** A site of the owner with its database, and that database's record as the API lists it now. */
async function ownDatabase() {
  const made = await siteWithDatabase(t0.owner);
  const database = async () =>
    json<{ databases: DatabaseRecord[] }>(await t0.owner.read.get(`v0/sites/${made.site.id}/databases`)).databases[0]!;
  return { ...made, database };
}

const rows = async (query: (sql: string) => Promise<{ body: Envelope }>) =>
  (await query('SELECT count(*) AS n FROM t')).body.result[0]!.results[0]!.n as number;

test('a write past the limit is refused as database_full and keeps every row written before; another site keeps writing', async (t) => {
  const tenant = await ownDatabase();
  const other = await ownDatabase();
  t.like(tenant.db, { maxBytes: LIMIT });
  t.is((await tenant.query('CREATE TABLE t (body BLOB)')).body.success, true);
  let refused: Envelope | undefined;
  for (let i = 0; i < 100 && !refused; i++) {
    const res = await tenant.query('INSERT INTO t VALUES (randomblob(65536))');
    t.is(res.status, res.body.success ? 200 : 400);
    if (!res.body.success) refused = res.body;
  }
  t.truthy(refused, 'the tenant was stopped before 100 inserts of 64 KiB');
  t.is(refused!.errors[0]!.code, 'database_full');
  t.regex(refused!.errors[0]!.message, new RegExp(`may grow to ${LIMIT} bytes`));
  const kept = await rows(tenant.query);
  t.true(kept >= 25 && kept < 32, `${kept} rows of 64 KiB in 2 MiB`);

  // A batch that would pass the limit is rolled back whole.
  const bigger = await tenant.query('INSERT INTO t SELECT randomblob(65536) FROM t');
  t.is(bigger.body.errors[0]!.code, 'database_full');
  t.is(await rows(tenant.query), kept);

  // On disk, the write-ahead log comes on top until it is checkpointed (at most about 4 MiB).
  const size = (await tenant.database()).sizeBytes;
  t.true(size > 1.5 * MIB && size <= LIMIT + 5 * MIB, `the database takes ${size} bytes`);

  // The tenant cannot lift the limit, nor VACUUM itself.
  t.is((await tenant.query('PRAGMA max_page_count = 1000000')).body.errors[0]!.code, 'statement_not_allowed');
  t.regex((await tenant.query('VACUUM')).body.errors[0]!.message, /cannot VACUUM/);

  t.is((await other.query('CREATE TABLE t (body BLOB)')).body.success, true);
  t.is((await other.query('INSERT INTO t VALUES (randomblob(65536))')).body.success, true);
});

test('deleted rows give their space back: writes succeed again and the file shrinks by itself', async (t) => {
  const tenant = await ownDatabase();
  await tenant.query('CREATE TABLE t (body BLOB)');
  for (let i = 0; i < 100; i++)
    if (!(await tenant.query('INSERT INTO t VALUES (randomblob(65536))')).body.success) break;
  const full = (await tenant.database()).sizeBytes;
  t.is((await tenant.query('DELETE FROM t WHERE rowid % 4 != 0')).body.success, true);
  const file = path.join(t0.dataDir, 'sites', tenant.site.id, 'db.sqlite');
  t.is(
    (await tenant.query('PRAGMA auto_vacuum')).body.result[0]!.results[0]!.auto_vacuum,
    2,
    'new databases use incremental auto-vacuum',
  );
  t.is(
    (await tenant.query('PRAGMA freelist_count')).body.result[0]!.results[0]!.freelist_count,
    0,
    'the free pages were given back',
  );
  await tenant.query('PRAGMA user_version = 1');
  // The file shrinks at the next checkpoint: the replicator's, a few seconds later (it alone checkpoints).
  await until(() => fs.statSync(file).size < full / 2, 'the database file to take less than half the space it did');
  t.is((await tenant.query('INSERT INTO t VALUES (randomblob(65536))')).body.success, true);
});

test('ctx.db writes past the limit fail with DATABASE_FULL', async (t) => {
  const site = await createSite(t0.owner);
  await t0.owner.api.post(`v0/sites/${site.id}/databases`);
  await deployFixture(t0.owner, site.bucketId, 'db-filler');
  const res = await t0.site(site.subdomain).get('api/db-filler', { responseType: 'json' });
  const body = res.body as unknown as { written: number; error: { code: string; message: string } };
  t.is(body.error.code, 'DATABASE_FULL');
  t.regex(body.error.message, /the database is full/);
  t.true(body.written >= 25 && body.written < 32);
});

test('compact_database rewrites a database made before incremental auto-vacuum, which then gives space back by itself', async (t) => {
  const site = await createSite(t0.owner);
  // A database file as an earlier Berth made it: no auto-vacuum, and half its pages free.
  const dir = path.join(t0.dataDir, 'sites', site.id);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const old = new Database(path.join(dir, 'db.sqlite'));
  old.pragma('journal_mode = WAL');
  old.exec('CREATE TABLE t (body BLOB)');
  for (let i = 0; i < 16; i++) old.exec('INSERT INTO t VALUES (randomblob(65536))');
  old.exec('DELETE FROM t WHERE rowid > 4');
  old.close();
  const db = json<{ database: DatabaseRecord }>(await t0.owner.api.post(`v0/sites/${site.id}/databases`)).database;
  const query = async (sql: string) =>
    json<Envelope>(await t0.owner.api.post(`v0/sites/${site.id}/databases/${db.id}/query`, { json: { sql } }));
  t.is((await query('PRAGMA auto_vacuum')).result[0]!.results[0]!.auto_vacuum, 0);

  const readOnly = await t0.owner.read.post(`v0/sites/${site.id}/databases/${db.id}/compact`);
  t.is(readOnly.statusCode, 403);
  t.is(json(readOnly).error.code, 'forbidden');
  // Calls made while it compacts wait for it, and are answered.
  const [compacted, ...during] = await Promise.all([
    t0.owner.api.post(`v0/sites/${site.id}/databases/${db.id}/compact`),
    ...Array.from({ length: 5 }, () => query('SELECT count(*) AS n FROM t')),
  ]);
  t.is(compacted!.statusCode, 200);
  t.true(during.every((d) => (d as Envelope).result[0]!.results[0]!.n === 4));
  const { bytesBefore, bytesAfter } = json<{ bytesBefore: number; bytesAfter: number }>(compacted!);
  t.true(bytesBefore > 1 * MIB && bytesAfter < 400 * 1024, `${bytesBefore} → ${bytesAfter}`);
  t.is((await query('PRAGMA auto_vacuum')).result[0]!.results[0]!.auto_vacuum, 2);
  t.is((await query('SELECT count(*) AS n FROM t')).result[0]!.results[0]!.n, 4);
  // From now on, deleted rows give their space back without another compaction.
  for (let i = 0; i < 8; i++) await query('INSERT INTO t VALUES (randomblob(65536))');
  await query('DELETE FROM t');
  t.is((await query('PRAGMA freelist_count')).result[0]!.results[0]!.freelist_count, 0);
  // No temporary file of the VACUUM is left in the site's folder.
  t.deepEqual(
    fs.readdirSync(dir).filter((name) => !name.startsWith('db.sqlite') && name !== '.db.sqlite-litestream'),
    [],
  );
});
