// Site databases: idempotent creation that resumes, the one-statement query API with its envelope,
// and ctx.db from a real function.
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { type TestBerth, createSite, deployFixture, json, startTestBerth } from './helpers/berth.ts';
import { type DatabaseRecord, type Envelope, siteWithDatabase } from './helpers/databases.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

test('creation is idempotent, one per site, and resumes an interrupted provisioning', async (t) => {
  const site = await createSite(t0.owner);
  const first = await t0.owner.api.post(`v0/sites/${site.id}/databases`);
  t.is(first.statusCode, 200);
  const db = json<{ database: DatabaseRecord }>(first).database;
  t.is(db.status, 'READY');
  const again = json<{ database: DatabaseRecord }>(await t0.owner.api.post(`v0/sites/${site.id}/databases`)).database;
  t.is(again.id, db.id);
  const list = json<{ databases: DatabaseRecord[] }>(await t0.owner.read.get(`v0/sites/${site.id}/databases`));
  t.deepEqual(
    list.databases.map((d) => d.id),
    [db.id],
  );
  t.true(fs.existsSync(path.join(t0.dataDir, 'sites', site.id, 'db.sqlite')));

  // A crash after the binding was written and before the provider made the database.
  const other = await createSite(t0.owner);
  await t0.berth.deps.db('databases').insert({
    id: crypto.randomUUID(),
    site_id: other.id,
    status: 'PROVISIONING',
    created_at: new Date().toISOString(),
    updated_at: new Date().toISOString(),
  });
  const resumed = json<{ database: DatabaseRecord }>(
    await t0.owner.api.post(`v0/sites/${other.id}/databases`),
  ).database;
  t.is(resumed.status, 'READY');
  t.true(fs.existsSync(path.join(t0.dataDir, 'sites', other.id, 'db.sqlite')));

  await t0.owner.api.post(`v0/sites/${other.id}`, { json: { status: 'ARCHIVED' } });
  const archived = await t0.owner.api.post(`v0/sites/${other.id}/databases`);
  t.is(archived.statusCode, 409);
  t.is(json(archived).error.code, 'site_not_active');
});

test('the query API runs one statement and answers the provider-style envelope', async (t) => {
  const { site, db, query } = await siteWithDatabase(t0.owner);
  const created = await query('CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT, pinned INTEGER, extra TEXT)');
  t.is(created.status, 200);
  t.true(created.body.success);
  const inserted = await query('INSERT INTO notes (body, pinned, extra) VALUES (?, ?, ?)', ['hello', true, null]);
  t.deepEqual(inserted.body.errors, []);
  t.like(inserted.body.result[0]!.meta, { changes: 1, last_row_id: 1 });
  t.is(typeof inserted.body.result[0]!.meta.duration, 'number');
  const selected = await query('SELECT * FROM notes WHERE id = ?', [1]);
  t.deepEqual(selected.body.result[0]!.results, [{ id: 1, body: 'hello', pinned: 1, extra: null }]);
  t.like(selected.body.result[0]!.meta, { changes: 0, last_row_id: null });

  const several = await t0.owner.api.post(`v0/sites/${site.id}/databases/${db.id}/query`, {
    json: { sql: 'SELECT 1; SELECT 2' },
  });
  t.is(several.statusCode, 400);
  t.is(json(several).error.code, 'multiple_statements');
  const broken = await query('SELECT * FROM missing_table');
  t.is(broken.status, 400);
  t.false(broken.body.success);
  t.regex(broken.body.errors[0]!.message, /no such table: missing_table/);
  const badParams = await t0.owner.api.post(`v0/sites/${site.id}/databases/${db.id}/query`, {
    json: { sql: 'SELECT ?', params: [{ a: 1 }] },
  });
  t.is(badParams.statusCode, 400);
  t.is(json(badParams).error.code, 'invalid_request');

  const big = await query('SELECT 9007199254740993 AS n');
  t.false(big.body.success, 'an integer past 2^53 is refused, not silently rounded');
  t.regex(big.body.errors[0]!.message, /CAST/);
  const asText = await query('SELECT CAST(9007199254740993 AS TEXT) AS n');
  t.deepEqual(asText.body.result[0]!.results, [{ n: '9007199254740993' }]);

  const readOnly = await t0.owner.read.post(`v0/sites/${site.id}/databases/${db.id}/query`, {
    json: { sql: 'SELECT 1' },
  });
  t.is(readOnly.statusCode, 403);
  t.is(json(readOnly).error.code, 'forbidden');
  const wrongSite = await createSite(t0.owner);
  const mismatch = await t0.owner.api.post(`v0/sites/${wrongSite.id}/databases/${db.id}/query`, {
    json: { sql: 'SELECT 1' },
  });
  t.is(mismatch.statusCode, 404);
});

test('readOnly: the query API reads rows and the schema, and refuses anything that may write, changing nothing', async (t) => {
  const { site, db, query } = await siteWithDatabase(t0.owner);
  await query('CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');
  await query('INSERT INTO notes (body) VALUES (?), (?)', ['one', 'two']);
  const read = async (sql: string, params?: unknown[], body: Record<string, unknown> = { readOnly: true }) => {
    const res = await t0.owner.api.post(`v0/sites/${site.id}/databases/${db.id}/query`, {
      json: { sql, ...(params ? { params } : {}), ...body },
    });
    return { status: res.statusCode, body: json<Envelope>(res) };
  };

  const rows = await read('SELECT id, body FROM notes WHERE body = ? ORDER BY id', ['two']);
  t.is(rows.status, 200);
  t.deepEqual(rows.body.result[0]!.results, [{ id: 2, body: 'two' }]);
  const schema = await read(
    'SELECT t.name AS tbl, c.name, c.type, c.pk, c."notnull" FROM sqlite_schema t JOIN pragma_table_info(t.name) c WHERE t.type = \'table\' AND t.name = ? ORDER BY c.cid',
    ['notes'],
  );
  t.deepEqual(schema.body.result[0]!.results, [
    { tbl: 'notes', name: 'id', type: 'INTEGER', pk: 1, notnull: 0 },
    { tbl: 'notes', name: 'body', type: 'TEXT', pk: 0, notnull: 1 },
  ]);
  const listed = await read(
    "SELECT name FROM pragma_table_list WHERE schema = 'main' AND type = 'table' ORDER BY name",
  );
  t.true(listed.body.success, JSON.stringify(listed.body.errors));

  for (const sql of [
    "INSERT INTO notes (body) VALUES ('three')",
    "UPDATE notes SET body = 'changed' RETURNING id",
    'WITH doomed AS (SELECT 1) DELETE FROM notes',
    'DROP TABLE notes',
    'CREATE TABLE other (v TEXT)',
    'CREATE TEMP TABLE scratch (v TEXT)',
    'PRAGMA user_version = 7',
    'PRAGMA foreign_keys = OFF',
    'PRAGMA table_info(notes)',
  ]) {
    const refused = await read(sql);
    t.is(refused.status, 400, sql);
    t.false(refused.body.success, sql);
    t.is(refused.body.errors[0]!.code, 'statement_not_allowed', sql);
    t.regex(refused.body.errors[0]!.message, /read-only/, sql);
  }
  // Read-only asks for less, never more: what the authorizer refuses stays refused.
  for (const sql of ['SELECT * FROM pragma_database_list', "ATTACH DATABASE 'x.sqlite' AS x"]) {
    const refused = await read(sql);
    t.is(refused.status, 400, sql);
    t.is(refused.body.errors[0]?.code, 'statement_not_allowed', sql);
  }

  t.deepEqual((await query('SELECT id, body FROM notes ORDER BY id')).body.result[0]!.results, [
    { id: 1, body: 'one' },
    { id: 2, body: 'two' },
  ]);
  t.deepEqual((await query("SELECT name FROM sqlite_schema WHERE name = 'other'")).body.result[0]!.results, []);
  t.deepEqual((await query('PRAGMA user_version')).body.result[0]!.results, [{ user_version: 0 }]);
  t.deepEqual((await query('PRAGMA foreign_keys')).body.result[0]!.results, [{ foreign_keys: 1 }]);
  t.is((await query("INSERT INTO notes (body) VALUES ('three')")).status, 200, 'writes without readOnly go on');
  // The same text again, read-only: the database process has it prepared already, and still refuses it.
  const again = await read("INSERT INTO notes (body) VALUES ('three')");
  t.is(again.body.errors[0]?.code, 'statement_not_allowed');
  t.deepEqual((await query('SELECT count(*) AS n FROM notes')).body.result[0]!.results, [{ n: 3 }]);

  const notBoolean = await read('SELECT 1', undefined, { readOnly: 'yes' });
  t.is(notBoolean.status, 400);
  t.is(
    json(
      await t0.owner.api.post(`v0/sites/${site.id}/databases/${db.id}/query`, {
        json: { sql: 'SELECT 1', readOnly: 'yes' },
      }),
    ).error.code,
    'invalid_request',
  );
  const readKey = await t0.owner.read.post(`v0/sites/${site.id}/databases/${db.id}/query`, {
    json: { sql: 'SELECT 1', readOnly: true },
  });
  t.is(readKey.statusCode, 403, 'the query operation needs WRITE, read-only or not');
  t.is(json(readKey).error.code, 'forbidden');
});

test('ctx.db from a function: query, first, execute and an atomic batch, with stable error codes', async (t) => {
  const { site, query } = await siteWithDatabase(t0.owner);
  await query('CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)');
  await deployFixture(t0.owner, site.bucketId, 'db');
  const call = async (body: unknown) =>
    JSON.parse((await t0.site(site.subdomain).post('api/db', { json: body })).body) as {
      value?: any;
      error?: { name: string; code: string; message: string };
    };

  t.deepEqual((await call({ op: 'execute', sql: 'INSERT INTO items (name) VALUES (?)', params: ['a'] })).value, {
    changes: 1,
    lastInsertRowId: 1,
  });
  t.deepEqual((await call({ op: 'query', sql: 'SELECT name FROM items' })).value, [{ name: 'a' }]);
  t.deepEqual((await call({ op: 'first', sql: 'SELECT name FROM items WHERE id = ?', params: [1] })).value, {
    name: 'a',
  });
  t.is((await call({ op: 'first', sql: 'SELECT name FROM items WHERE id = 99' })).value, null);

  const batch = await call({
    op: 'batch',
    statements: [{ sql: "INSERT INTO items (name) VALUES ('b')" }, { sql: 'SELECT count(*) AS n FROM items' }],
  });
  t.deepEqual(batch.value, [
    { rows: [], changes: 1, lastInsertRowId: 2 },
    { rows: [{ n: 2 }], changes: 0, lastInsertRowId: null },
  ]);
  // All or nothing: the duplicate fails the batch and the first insert is rolled back.
  const failed = await call({
    op: 'batch',
    statements: [{ sql: "INSERT INTO items (name) VALUES ('c')" }, { sql: "INSERT INTO items (name) VALUES ('a')" }],
  });
  t.like(failed.error, { name: 'BerthContextError', code: 'DATABASE_QUERY_FAILED' });
  t.false(failed.error!.message.includes('UNIQUE'), 'no provider diagnostics reach the function');
  t.deepEqual((await call({ op: 'query', sql: 'SELECT name FROM items ORDER BY id' })).value, [
    { name: 'a' },
    { name: 'b' },
  ]);
  const logs = json<{ logs: Array<{ message: string }> }>(await t0.owner.read.get(`v0/sites/${site.id}/logs`)).logs;
  t.true(
    logs.some((l) => l.message.includes('UNIQUE constraint failed')),
    'the diagnostic is in the site’s logs',
  );

  t.like((await call({ op: 'query', sql: 'SELECT * FROM _berth_migrations' })).error, {
    code: 'DATABASE_RESERVED_TABLE',
  });
  t.like((await call({ op: 'query', sql: 'SELECT 1; SELECT 2' })).error, { code: 'DATABASE_MULTIPLE_STATEMENTS' });
  t.like((await call({ op: 'query', sql: 'SELECT ?', params: [{}] })).error, { code: 'DATABASE_INVALID_ARGUMENT' });
  t.like((await call({ op: 'batch', statements: [] })).error, { code: 'DATABASE_INVALID_ARGUMENT' });

  const bare = await createSite(t0.owner);
  await deployFixture(t0.owner, bare.bucketId, 'db');
  const none = JSON.parse(
    (await t0.site(bare.subdomain).post('api/db', { json: { op: 'query', sql: 'SELECT 1' } })).body,
  );
  t.is(none.error.code, 'DATABASE_NOT_FOUND');
});
