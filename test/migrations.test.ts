// Migrations with a ledger in the site database: single and ordered-prefix applies, conflicts,
// failures that roll back, the execution lease, legacy receipts, and a server killed mid-migration.
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import { type TestBerth, apiClient, createSite, json, makeDataDir, startTestBerth } from './helpers/berth.ts';
import { startServe } from './helpers/process.ts';
import { ownerOf } from './helpers/served.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

type Receipt = { id: number; name: string; checksum: string; appliedAt: string; sourceAvailable: boolean };

async function database() {
  const site = await createSite(t0.owner);
  const db = json<{ database: { id: string } }>(await t0.owner.api.post(`v0/sites/${site.id}/databases`)).database;
  const base = `v0/sites/${site.id}/databases/${db.id}`;
  const query = async (sql: string) =>
    json<{ success: boolean; result: Array<{ results: Array<Record<string, unknown>> }> }>(
      await t0.owner.api.post(`${base}/query`, { json: { sql } }),
    );
  const receipts = async () => json<{ applied: Receipt[] }>(await t0.owner.read.get(`${base}/migrations`)).applied;
  return { site, db, base, query, receipts };
}

const CREATE_NOTES = 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);';

test('one migration: applied with its receipt, idempotent, and never edited', async (t) => {
  const { base, query, receipts } = await database();
  const noConfirm = await t0.owner.api.post(`${base}/migrations`, {
    json: { name: '0001_notes.sql', sql: CREATE_NOTES },
  });
  t.is(noConfirm.statusCode, 400);
  const badName = await t0.owner.api.post(`${base}/migrations`, {
    json: { name: 'notes.sql', sql: CREATE_NOTES, confirm: true },
  });
  t.is(badName.statusCode, 400);
  t.is(json(badName).error.code, 'invalid_migration_name');

  const applied = await t0.owner.api.post(`${base}/migrations`, {
    json: { name: '0001_notes.sql', sql: CREATE_NOTES, confirm: true },
  });
  t.is(applied.statusCode, 200);
  t.deepEqual(json(applied), { migration: { name: '0001_notes.sql', sql: CREATE_NOTES }, alreadyApplied: false });
  t.true((await query("INSERT INTO notes (body) VALUES ('x')")).success);
  const [receipt] = await receipts();
  t.like(receipt, { id: 1, name: '0001_notes.sql', sourceAvailable: true });
  t.regex(receipt!.appliedAt, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
  t.is(receipt!.checksum, (await import('node:crypto')).createHash('sha256').update(CREATE_NOTES).digest('hex'));
  const one = json<{ migration: { sql: string; sourceAvailable: boolean } }>(
    await t0.owner.read.get(`${base}/migrations/0001_notes.sql`),
  );
  t.like(one.migration, { sql: CREATE_NOTES, sourceAvailable: true });

  const again = await t0.owner.api.post(`${base}/migrations`, {
    json: { name: '0001_notes.sql', sql: CREATE_NOTES, confirm: true },
  });
  t.is(json<{ alreadyApplied: boolean }>(again).alreadyApplied, true);
  const edited = await t0.owner.api.post(`${base}/migrations`, {
    json: { name: '0001_notes.sql', sql: 'DROP TABLE notes;', confirm: true },
  });
  t.is(edited.statusCode, 409);
  t.is(json(edited).error.code, 'migration_history_conflict');
  t.regex(String(json(edited).error.details?.recovery), /new forward migration/);
  t.is((await receipts()).length, 1);
  t.is((await t0.owner.read.get(`${base}/migrations/0009_missing.sql`)).statusCode, 404);
});

test('a failing migration rolls back, writes no receipt, and can be retried corrected under a new name', async (t) => {
  const { base, query, receipts } = await database();
  const failing = await t0.owner.api.post(`${base}/migrations`, {
    json: {
      name: '0001_half.sql',
      sql: 'CREATE TABLE first_half (x); INSERT INTO no_such_table VALUES (1);',
      confirm: true,
    },
  });
  t.is(failing.statusCode, 422);
  t.is(json(failing).error.code, 'migration_failed');
  t.regex(json(failing).error.message, /no such table/);
  t.deepEqual(await receipts(), []);
  const leftover = await query("SELECT name FROM sqlite_master WHERE name = 'first_half'");
  t.deepEqual(leftover.result[0]!.results, [], 'the schema change was rolled back');

  const fixed = await t0.owner.api.post(`${base}/migrations`, {
    json: { name: '0002_half.sql', sql: 'CREATE TABLE first_half (x);', confirm: true },
  });
  t.is(fixed.statusCode, 200);
  t.deepEqual(
    (await receipts()).map((r) => r.name),
    ['0002_half.sql'],
  );
});

test('ordered-prefix apply: only pending entries, validated against the ledger', async (t) => {
  const { base, receipts } = await database();
  const history = [
    { name: '0001_notes.sql', sql: CREATE_NOTES },
    { name: '0002_tags.sql', sql: 'CREATE TABLE tags (name TEXT);' },
  ];
  const first = await t0.owner.api.post(`${base}/migrations/apply`, {
    json: { migrations: history.slice(0, 1), confirm: true },
  });
  t.deepEqual(json(first), {
    appliedNames: ['0001_notes.sql'],
    nextAction: 'NONE',
    nextCommand: `GET /${base}/migrations`,
  });
  const rest = await t0.owner.api.post(`${base}/migrations/apply`, { json: { migrations: history, confirm: true } });
  t.deepEqual(json<{ appliedNames: string[] }>(rest).appliedNames, ['0002_tags.sql']);
  const none = await t0.owner.api.post(`${base}/migrations/apply`, { json: { migrations: history, confirm: true } });
  t.like(json(none), { appliedNames: [], nextAction: 'NONE' });

  const rewritten = await t0.owner.api.post(`${base}/migrations/apply`, {
    json: { migrations: [{ name: '0001_notes.sql', sql: 'CREATE TABLE other (x);' }, history[1]], confirm: true },
  });
  t.is(rewritten.statusCode, 409);
  t.is(json(rewritten).error.code, 'migration_history_conflict');
  const truncated = await t0.owner.api.post(`${base}/migrations/apply`, {
    json: { migrations: history.slice(0, 1), confirm: true },
  });
  t.is(truncated.statusCode, 409);
  const unordered = await t0.owner.api.post(`${base}/migrations/apply`, {
    json: { migrations: [history[1], history[0]], confirm: true },
  });
  t.is(unordered.statusCode, 400);
  t.is((await receipts()).length, 2);
});

test('a live lease stops a second run with recovery details; an expired one does not', async (t) => {
  const { db, base, receipts } = await database();
  const now = Date.now();
  await t0.berth.deps.db('migration_leases').insert({
    database_id: db.id,
    holder: 'other-run',
    acquired_at: new Date(now).toISOString(),
    expires_at: new Date(now + 60_000).toISOString(),
  });
  const blocked = await t0.owner.api.post(`${base}/migrations`, {
    json: { name: '0001_notes.sql', sql: CREATE_NOTES, confirm: true },
  });
  t.is(blocked.statusCode, 409);
  t.is(json(blocked).error.code, 'migration_in_progress');
  t.is(json(blocked).error.details?.nextCommand, `GET /${base}/migrations`);
  t.deepEqual(await receipts(), []);

  await t0.berth.deps
    .db('migration_leases')
    .where({ database_id: db.id })
    .update({ expires_at: new Date(now - 1).toISOString() });
  const after = await t0.owner.api.post(`${base}/migrations`, {
    json: { name: '0001_notes.sql', sql: CREATE_NOTES, confirm: true },
  });
  t.is(after.statusCode, 200);
  t.is(
    await t0.berth.deps.db('migration_leases').where({ database_id: db.id }).first(),
    undefined,
    'released after the run',
  );
});

test('receipts without stored SQL report sourceAvailable: false and no SQL', async (t) => {
  const { base, query } = await database();
  await t0.owner.api.post(`${base}/migrations`, { json: { name: '0001_notes.sql', sql: CREATE_NOTES, confirm: true } });
  await query(
    "INSERT INTO _berth_migrations (name, checksum, sql, applied_at) VALUES ('0000_legacy.sql', 'abc', NULL, '2025-01-01 00:00:00')",
  );
  const legacy = json<{ migration: Record<string, unknown> }>(
    await t0.owner.read.get(`${base}/migrations/0000_legacy.sql`),
  ).migration;
  t.deepEqual(legacy, { name: '0000_legacy.sql', checksum: 'abc', sourceAvailable: false });
});

test('a server killed during a migration leaves the migration and its receipt, or neither', async (t) => {
  const dataDir = await makeDataDir(t);
  const server = await startServe({ BERTH_DATA_DIR: dataDir });
  const owner = ownerOf(server);
  const api = owner.api;
  const site = json<{ id: string }>(await api.post('v0/sites', { json: { accountId: owner.id, name: 'kill' } }));
  const db = json<{ database: { id: string } }>(await api.post(`v0/sites/${site.id}/databases`)).database;
  const base = `v0/sites/${site.id}/databases/${db.id}`;
  const heavy =
    'CREATE TABLE big (x INTEGER); WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) INSERT INTO big SELECT x FROM c;';
  const pending = api
    .post(`${base}/migrations`, { json: { name: '0001_big.sql', sql: heavy, confirm: true } })
    .catch(() => null);
  await sleep(400);
  server.child.kill('SIGKILL');
  await server.exited;
  await pending;

  const again = await startServe({ BERTH_DATA_DIR: dataDir });
  t.teardown(async () => {
    again.child.kill('SIGTERM');
    await again.exited;
  });
  const api2 = apiClient(again.url, owner.writeKey);
  const receipts = json<{ applied: Receipt[] }>(await api2.get(`${base}/migrations`)).applied;
  const table = json<{ result: Array<{ results: unknown[] }> }>(
    await api2.post(`${base}/query`, { json: { sql: "SELECT name FROM sqlite_master WHERE name = 'big'" } }),
  );
  const tableExists = table.result[0]!.results.length === 1;
  t.is(receipts.length === 1, tableExists, 'receipt and schema change agree');
  if (tableExists) {
    const count = json<{ result: Array<{ results: Array<{ n: number }> }> }>(
      await api2.post(`${base}/query`, { json: { sql: 'SELECT count(*) AS n FROM big' } }),
    );
    t.is(count.result[0]!.results[0]!.n, 3_000_000);
  }
});
