// A site database can reach nothing but itself: tried as a hostile tenant would, through the query
// endpoint with the site's own WRITE key, through ctx.db from a real function, and through
// migrations. Each attack must be refused by SQLite's own confinement, reveal no host path, and leave
// the metadata and every other site's database untouched and answering.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { type TestBerth, deployFixture, json, startTestBerth } from '../helpers/berth.ts';
import { siteWithDatabase } from '../helpers/databases.ts';
import { processesMentioning } from '../helpers/process.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

/** Another tenant whose data must stay private and whose database must keep answering. */
async function bystander(server: TestBerth = t0) {
  const other = await server.newAccount();
  const { site, query } = await siteWithDatabase(other);
  await query('CREATE TABLE secrets (v TEXT)');
  await query("INSERT INTO secrets VALUES ('theirs')");
  return {
    site,
    async answers(t: { deepEqual(a: unknown, b: unknown, m?: string): void }) {
      const res = await query('SELECT v FROM secrets');
      t.deepEqual(res.body.result[0]?.results, [{ v: 'theirs' }], 'another site’s database keeps answering');
    },
  };
}

const keyCount = async () => Number((await t0.berth.deps.db('api_keys').count({ n: '*' }).first())?.n);

const ATTACKS = (dataDir: string, otherSiteId: string) => [
  'PRAGMA database_list',
  'SELECT * FROM pragma_database_list',
  'SELECT file FROM pragma_database_list',
  `ATTACH DATABASE '${dataDir}/meta.sqlite' AS m`,
  `attach "${dataDir}/meta.sqlite" as m`,
  `ATTACH 'file:${dataDir}/meta.sqlite?mode=ro' AS m`,
  `ATTACH '${dataDir}/sites/${otherSiteId}/db.sqlite' AS o`,
  `ATTACH '${os.tmpdir()}/berth-attack-attach.sqlite' AS x`,
  "ATTACH '' AS anonymous",
  'DETACH main',
  'PRAGMA writable_schema = 1',
  'PRAGMA writable_schema = ON',
  'pragma main.writable_schema=true',
  'PRAGMA hard_heap_limit = 1000',
  'PRAGMA soft_heap_limit = 1000',
  `PRAGMA temp_store_directory = '${os.tmpdir()}'`,
  'PRAGMA temp_store = FILE',
  'PRAGMA mmap_size = 1000000000',
  'PRAGMA cache_size = -100000000',
  'PRAGMA journal_mode = OFF',
  'PRAGMA main.journal_mode = DELETE',
  'PRAGMA synchronous = OFF',
  'PRAGMA locking_mode = EXCLUSIVE',
  'PRAGMA schema_version = 1',
  'PRAGMA wal_checkpoint(TRUNCATE)',
  'PRAGMA trusted_schema = 1',
  'PRAGMA threads = 8',
  "SELECT load_extension('/usr/lib/x86_64-linux-gnu/libsqlite3.so.0')",
  "SELECT fts3_tokenizer('simple')",
  'BEGIN',
  'SAVEPOINT s',
];

/** Refused too, by SQLite before the authorizer is asked: every statement already runs in a transaction. */
const VACUUMS = [`VACUUM INTO '${os.tmpdir()}/berth-attack-vacuum.sqlite'`, 'VACUUM'];

test('the query endpoint refuses every way out of the database, and reveals no host path', async (t) => {
  const other = await bystander();
  const { query } = await siteWithDatabase(t0.owner);
  const keysBefore = await keyCount();
  for (const sql of ATTACKS(t0.dataDir, other.site.id)) {
    const res = await query(sql);
    t.is(res.status, 400, sql);
    t.false(res.body.success, sql);
    t.is(res.body.errors[0]?.code, 'statement_not_allowed', sql);
    t.false(res.body.errors[0]!.message.includes(t0.dataDir), `${sql}: no host path in the error`);
  }
  for (const sql of VACUUMS) {
    const res = await query(sql);
    t.is(res.status, 400, sql);
    t.regex(res.body.errors[0]!.message, /cannot VACUUM/, sql);
  }
  // Parameters are no way around it either.
  const bound = await query('ATTACH DATABASE ? AS m', [path.join(t0.dataDir, 'meta.sqlite')]);
  t.is(bound.body.errors[0]?.code, 'statement_not_allowed');
  const missing = await query('SELECT * FROM no_such_table');
  t.regex(missing.body.errors[0]!.message, /no such table/);
  t.false(missing.body.errors[0]!.message.includes(t0.dataDir));

  t.false(fs.existsSync(path.join(os.tmpdir(), 'berth-attack-vacuum.sqlite')), 'VACUUM INTO wrote no file');
  t.false(fs.existsSync(path.join(os.tmpdir(), 'berth-attack-attach.sqlite')), 'ATTACH created no file');
  t.is(await keyCount(), keysBefore, 'no key was added to the metadata');
  await other.answers(t);
});

test('what a site needs of its own database still works', async (t) => {
  const { query } = await siteWithDatabase(t0.owner);
  t.true((await query('CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)')).body.success);
  t.true((await query('CREATE INDEX notes_body ON notes (body)')).body.success);
  t.true((await query('CREATE VIRTUAL TABLE search USING fts5(body)')).body.success);
  t.true((await query("INSERT INTO search VALUES ('hello world')")).body.success);
  t.deepEqual((await query("SELECT body FROM search WHERE search MATCH 'hello'")).body.result[0]?.results, [
    { body: 'hello world' },
  ]);
  t.deepEqual(
    (await query('PRAGMA table_info(notes)')).body.result[0]?.results.map((c) => c.name),
    ['id', 'body'],
  );
  t.true((await query('PRAGMA user_version = 7')).body.success);
  t.deepEqual((await query('PRAGMA user_version')).body.result[0]?.results, [{ user_version: 7 }]);
  t.deepEqual((await query('PRAGMA journal_mode')).body.result[0]?.results, [{ journal_mode: 'wal' }]);
  t.true((await query('PRAGMA foreign_key_check')).body.success);
  t.deepEqual((await query('PRAGMA integrity_check')).body.result[0]?.results, [{ integrity_check: 'ok' }]);
  t.deepEqual((await query("SELECT name FROM sqlite_master WHERE name = 'notes'")).body.result[0]?.results, [
    { name: 'notes' },
  ]);
  const virtual = await query('CREATE VIRTUAL TABLE probe USING dbstat');
  t.is(virtual.body.errors[0]?.code, 'statement_not_allowed', 'only full-text and R-tree modules');
});

test('ctx.db from a function is confined the same way, batch included', async (t) => {
  const other = await bystander();
  const { site, query } = await siteWithDatabase(t0.owner);
  await query('CREATE TABLE items (name TEXT)');
  await deployFixture(t0.owner, site.bucketId, 'db');
  const call = async (body: unknown) =>
    JSON.parse((await t0.site(site.subdomain).post('api/db', { json: body })).body) as {
      value?: unknown;
      error?: { code: string; message: string };
    };
  const keysBefore = await keyCount();
  for (const sql of ATTACKS(t0.dataDir, other.site.id)) {
    const res = await call({ op: 'execute', sql });
    t.is(res.error?.code, 'DATABASE_NOT_ALLOWED', sql);
    t.false(res.error!.message.includes(t0.dataDir), `${sql}: no host path in the error`);
  }
  for (const sql of VACUUMS) t.is((await call({ op: 'execute', sql })).error?.code, 'DATABASE_QUERY_FAILED', sql);
  const bound = await call({
    op: 'execute',
    sql: 'ATTACH DATABASE ? AS m',
    params: [path.join(t0.dataDir, 'meta.sqlite')],
  });
  t.is(bound.error?.code, 'DATABASE_NOT_ALLOWED');
  const batch = await call({
    op: 'batch',
    statements: [
      { sql: "INSERT INTO items VALUES ('kept?')" },
      { sql: `ATTACH '${t0.dataDir}/meta.sqlite' AS m` },
      { sql: 'INSERT INTO m.api_keys SELECT * FROM m.api_keys' },
    ],
  });
  t.is(batch.error?.code, 'DATABASE_NOT_ALLOWED');
  t.deepEqual(
    (await query('SELECT count(*) AS n FROM items')).body.result[0]?.results,
    [{ n: 0 }],
    'the batch left nothing behind',
  );
  // The ledger is out of reach through a view or a trigger as well as by name.
  await query('CREATE VIEW ledger AS SELECT * FROM _berth_migrations');
  t.is((await call({ op: 'query', sql: 'SELECT * FROM ledger' })).error?.code, 'DATABASE_RESERVED_TABLE');
  await query('CREATE TRIGGER forge AFTER INSERT ON items BEGIN DELETE FROM _berth_migrations; END');
  t.is((await call({ op: 'execute', sql: "INSERT INTO items VALUES ('x')" })).error?.code, 'DATABASE_RESERVED_TABLE');
  t.is(await keyCount(), keysBefore);
  await other.answers(t);
});

test('a statement prepared for one caller is never reused for another with fewer rights', async (t) => {
  const { site, query } = await siteWithDatabase(t0.owner);
  await query('CREATE TABLE items (name TEXT)');
  await deployFixture(t0.owner, site.bucketId, 'db');
  const call = async (body: unknown) =>
    JSON.parse((await t0.site(site.subdomain).post('api/db', { json: body })).body) as {
      value?: unknown;
      error?: { code: string };
    };
  const sql = 'SELECT count(*) AS n FROM _berth_migrations';
  // The query endpoint may read the ledger; the same text from a function, before and after, may not.
  t.is((await call({ op: 'query', sql })).error?.code, 'DATABASE_RESERVED_TABLE');
  for (let i = 0; i < 3; i++) t.deepEqual((await query(sql)).body.result[0]?.results, [{ n: 0 }]);
  t.is((await call({ op: 'query', sql })).error?.code, 'DATABASE_RESERVED_TABLE');
  // A view created after a statement was prepared is judged when the statement is prepared anew.
  t.deepEqual((await call({ op: 'query', sql: 'SELECT * FROM items' })).value, []);
  await query('DROP TABLE items');
  await query('CREATE VIEW items AS SELECT name FROM _berth_migrations');
  t.is((await call({ op: 'query', sql: 'SELECT * FROM items' })).error?.code, 'DATABASE_RESERVED_TABLE');
});

test('migrations are confined too, and cannot rewrite the ledger', async (t) => {
  const other = await bystander();
  const { base, query } = await siteWithDatabase(t0.owner);
  const apply = (name: string, sql: string) =>
    t0.owner.api.post(`${base}/migrations`, { json: { name, sql, confirm: true } });
  for (const [i, sql] of [
    `CREATE TABLE a (x); ATTACH '${t0.dataDir}/meta.sqlite' AS m;`,
    'PRAGMA writable_schema = 1; UPDATE sqlite_master SET sql = NULL;',
    `VACUUM INTO '${os.tmpdir()}/berth-attack-migration.sqlite';`,
    'DELETE FROM _berth_migrations;',
    "INSERT INTO _berth_migrations (name, checksum, applied_at) VALUES ('0099_forged.sql', 'x', 'now');",
    'PRAGMA hard_heap_limit = 1;',
  ].entries()) {
    const res = await apply(`000${i + 1}_attack.sql`, sql);
    t.is(res.statusCode, 422, sql);
    t.is(json(res).error.code, 'migration_failed', sql);
    t.false(json(res).error.message.includes(t0.dataDir));
  }
  const receipts = json<{ applied: unknown[] }>(await t0.owner.read.get(`${base}/migrations`)).applied;
  t.deepEqual(receipts, [], 'no receipt was written or forged');
  t.deepEqual(
    (await query("SELECT name FROM sqlite_master WHERE name = 'a'")).body.result[0]?.results,
    [],
    'the failed migration was rolled back',
  );
  t.false(fs.existsSync(path.join(os.tmpdir(), 'berth-attack-migration.sqlite')));
  await other.answers(t);
});

test('triggers and views of the tenant get no more than the tenant’s rights inside Berth’s own statements', async (t) => {
  const { base, query } = await siteWithDatabase(t0.owner);
  const apply = (name: string, sql: string) =>
    t0.owner.api.post(`${base}/migrations`, { json: { name, sql, confirm: true } });
  t.true((await query('CREATE TABLE leak (v TEXT)')).body.success);
  // A trigger on the ledger fires when Berth writes a receipt.
  t.true(
    (
      await query(
        'CREATE TRIGGER spy AFTER INSERT ON _berth_migrations BEGIN INSERT INTO leak SELECT file FROM pragma_database_list; END',
      )
    ).body.success,
  );
  const res = await apply('0001_innocent.sql', 'CREATE TABLE innocent (x);');
  t.is(res.statusCode, 422);
  t.is(json(res).error.code, 'migration_failed');
  t.deepEqual((await query('SELECT v FROM leak')).body.result[0]?.results, [], 'no host path was written');
  t.true((await query('DROP TRIGGER spy')).body.success);
  // A view standing in for the ledger is read by Berth under the tenant's rights too.
  t.true((await query('DROP TABLE _berth_migrations')).body.success);
  t.true(
    (
      await query(
        "CREATE VIEW _berth_migrations AS SELECT 1 AS id, file AS name, '' AS checksum, NULL AS sql, '' AS applied_at FROM pragma_database_list",
      )
    ).body.success,
  );
  const listed = await t0.owner.read.get(`${base}/migrations`);
  t.false(JSON.stringify(listed.body).includes(t0.dataDir), 'no host path in the receipts');
});

test('the replicator’s tables are out of a tenant’s reach: not read, written, dropped, nor taken by a rename', async (t) => {
  const { query } = await siteWithDatabase(t0.owner);
  await query('CREATE TABLE mine (id INTEGER PRIMARY KEY, seq INTEGER)');
  for (const sql of [
    'SELECT * FROM _litestream_seq',
    'INSERT INTO _litestream_seq (id, seq) VALUES (1, 99)',
    'UPDATE _litestream_lock SET id = 2',
    'DELETE FROM _litestream_seq',
    'DROP TABLE _litestream_lock',
    'CREATE TRIGGER t AFTER INSERT ON _litestream_seq BEGIN SELECT 1; END',
    'CREATE TABLE _litestream_other (x)',
  ]) {
    const res = await query(sql);
    t.is(res.status, 400, sql);
    t.is(res.body.errors[0]?.code, 'statement_not_allowed', sql);
    t.regex(res.body.errors[0]!.message, /belong to the database's replication/, sql);
  }
  // The names exist before any tenant statement, so none can be taken over.
  const renamed = await query('ALTER TABLE mine RENAME TO _litestream_seq');
  t.false(renamed.body.success);
  // A trigger of the tenant's cannot reach them from Berth's own statements either.
  await query('CREATE TABLE log (n)');
  await query('CREATE TRIGGER sneak AFTER INSERT ON log BEGIN DELETE FROM _litestream_seq; END');
  const fired = await query('INSERT INTO log VALUES (1)');
  t.is(fired.body.errors[0]?.code, 'statement_not_allowed');
});

test('a runaway statement is stopped at its time limit and the database recovers; others never wait on it', async (t) => {
  const strict = await startTestBerth({ databaseTimeoutMs: 1000 });
  t.teardown(() => strict.dispose());
  const other = await bystander(strict);
  const { query } = await siteWithDatabase(strict.owner);
  await query('CREATE TABLE kept (v TEXT)');
  const runaway = query('WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c');
  await other.answers(t);
  const res = await runaway;
  t.is(res.status, 400);
  t.is(res.body.errors[0]?.code, 'statement_timeout');
  t.true((await query("INSERT INTO kept VALUES ('after')")).body.success, 'the next statement runs on a fresh process');
  t.deepEqual((await query('SELECT v FROM kept')).body.result[0]?.results, [{ v: 'after' }]);
});

test('results and values are bounded: no statement can flood memory', async (t) => {
  const other = await bystander();
  const { query } = await siteWithDatabase(t0.owner);
  const huge = await query('SELECT zeroblob(200 * 1024 * 1024) AS b');
  t.is(huge.body.errors[0]?.code, 'statement_failed');
  t.regex(huge.body.errors[0]!.message, /too big/);
  const many = await query(
    'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000) SELECT x, hex(zeroblob(500)) AS filler FROM c',
  );
  t.is(many.body.errors[0]?.code, 'result_too_large');
  t.true((await query('SELECT 1 AS one')).body.success);
  await other.answers(t);
});

test('a result too large to hold in memory is refused as result_too_large before it is built; the database process survives', async (t) => {
  const other = await bystander();
  const { site, query } = await siteWithDatabase(t0.owner);
  await query('CREATE TABLE kept (v TEXT)');
  await query("INSERT INTO kept VALUES ('before')");
  const pidBefore = processesMentioning(path.join(t0.dataDir, 'sites', site.id));
  // Millions of small rows: tiny as JSON row by row, far past the database process's heap built whole.
  const rows = await query(
    'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000000) SELECT x FROM c',
  );
  t.is(rows.status, 400);
  t.is(rows.body.errors[0]?.code, 'result_too_large');
  // One value as large as SQLite allows, and the same from a write that returns what it wrote.
  const value = await query('SELECT zeroblob(60 * 1024 * 1024) AS b');
  t.is(value.body.errors[0]?.code, 'result_too_large');
  const returning = await query(
    "INSERT INTO kept SELECT printf('%.*c', 1000, 'x') FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 40000) SELECT x FROM c) RETURNING v",
  );
  t.is(returning.body.errors[0]?.code, 'result_too_large');
  t.deepEqual(
    (await query('SELECT v FROM kept')).body.result[0]?.results,
    [{ v: 'before' }],
    'nothing of the refused write was kept',
  );
  t.deepEqual(
    processesMentioning(path.join(t0.dataDir, 'sites', site.id)),
    pidBefore,
    'the same database process answers',
  );

  await deployFixture(t0.owner, site.bucketId, 'db');
  const call = async (body: unknown) =>
    JSON.parse((await t0.site(site.subdomain).post('api/db', { json: body })).body) as {
      value?: unknown;
      error?: { code: string };
    };
  const fromFunction = await call({
    op: 'query',
    sql: 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000000) SELECT x FROM c',
  });
  t.is(fromFunction.error?.code, 'DATABASE_RESULT_TOO_LARGE');
  t.deepEqual((await call({ op: 'first', sql: 'SELECT count(*) AS n FROM kept' })).value, { n: 1 });
  await other.answers(t);
});

test('database files are opened by a process that may touch only its own site folder and its line socket', async (t) => {
  const { site, query } = await siteWithDatabase(t0.owner);
  await query('SELECT 1');
  const pids = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  const mine = pids
    .map((pid) => {
      try {
        return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      } catch {
        return [];
      }
    })
    .find((args) => args.some((a) => a.endsWith('sqlite-host.ts')) && args.some((a) => a.includes(site.id)));
  t.truthy(mine, 'the site database is served by its own process');
  const siteDir = path.join(t0.dataDir, 'sites', site.id);
  // And one socket path, its own, where the host links the workers it connects to (deno/db-lines.ts).
  const line = mine!.find((a) => a.startsWith('--allow-net='))!.slice('--allow-net=unix:'.length);
  t.regex(line, new RegExp(`^${path.join(t0.dataDir, 'runtime', 'sockets')}/[0-9a-f]{16}\\.dbs$`));
  t.deepEqual(mine!.filter((a) => a.startsWith('--allow')).sort(), [
    `--allow-net=unix:${line}`,
    `--allow-read=${siteDir},${line}`,
    `--allow-write=${siteDir},${line}`,
  ]);
});
