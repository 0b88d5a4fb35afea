// `berth admin copy-metadata`: an instance with sites, file versions, functions, secrets, a database,
// users and a session moves its metadata into an empty PostgreSQL database, and the same data dir
// started on it serves exactly what it served before. A running source, a non-empty target and a bad
// URL are refused, and the source is left as it was.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import got from 'got';
import { apiClient, json, makeDataDir } from './helpers/berth.ts';
import { runBerth, startServe, withBackend } from './helpers/process.ts';
import { ownerOf } from './helpers/served.ts';
import { loadConfig } from '../control-plane/config.ts';
import { openMetadata } from '../control-plane/db/metadata.ts';
import { TABLES } from '../control-plane/db/copy-metadata.ts';
import { createUser } from '../control-plane/services/users.ts';
import { databaseFor, onPostgres } from './helpers/postgres.ts';

const FIXTURES = path.resolve(import.meta.dirname, 'fixtures/functions');
const PASSWORD = 'a long enough password';

const sha256 = (file: string) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');

test('an instance moves its metadata into an empty PostgreSQL database and serves the same from it', async (t) => {
  t.timeout(180_000);
  const dataDir = path.join(await makeDataDir(t), 'data');
  const first = await startServe({ BERTH_DATA_DIR: dataDir });
  t.teardown(() => void first.child.kill('SIGKILL'));
  const account = ownerOf(first);
  const site = json<{ id: string; subdomain: string; bucketId: string }>(
    await account.api.post('v0/sites', { json: { accountId: account.id, name: 'moving' } }),
  );
  const put = (file: string, body: string | Buffer, type: string) =>
    account.api.put(`v0/buckets/${site.bucketId}/objects/${file}`, { body, headers: { 'content-type': type } });
  t.is((await put('web/index.html', '<h1>one</h1>', 'text/html')).statusCode, 200);
  const second = json<{ fileId: string; versionId: string }>(await put('web/index.html', '<h1>two</h1>', 'text/html'));
  t.is(
    (await put('api/secret.ts', fs.readFileSync(path.join(FIXTURES, 'secret.ts')), 'text/typescript')).statusCode,
    200,
  );
  t.is((await put('api/db.ts', fs.readFileSync(path.join(FIXTURES, 'db.ts')), 'text/typescript')).statusCode, 200);
  t.is(
    (await account.api.post(`v0/sites/${site.id}/secrets`, { json: { name: 'TOKEN', value: 'kept secret' } }))
      .statusCode,
    200,
  );
  const database = json<{ database: { id: string } }>(await account.api.post(`v0/sites/${site.id}/databases`)).database;
  const query = (sql: string) =>
    account.api.post(`v0/sites/${site.id}/databases/${database.id}/query`, { json: { sql } });
  t.is((await query('CREATE TABLE notes (body TEXT)')).statusCode, 200);
  t.is((await query("INSERT INTO notes VALUES ('moved')")).statusCode, 200);
  t.is((await account.api.get(`v0/sites/${site.id}/secrets/TOKEN`)).statusCode, 200, 'a read that is logged');
  // A member, made beside the running server as `berth admin create-user` does, who signs in.
  const metadata = await openMetadata(loadConfig(await withBackend({ BERTH_DATA_DIR: dataDir })));
  await createUser(
    { db: metadata.db, now: () => new Date() },
    { email: 'ada@example.com', accountId: account.id, role: 'ADMIN', password: PASSWORD },
  );
  await metadata.close();
  const control = got.extend({
    prefixUrl: first.url,
    throwHttpErrors: false,
    followRedirect: false,
    retry: { limit: 0 },
  });
  const signedIn = await control.post('login', { form: { email: 'ada@example.com', password: PASSWORD } });
  const cookie = (signedIn.headers['set-cookie'] as string[])
    .find((c) => c.startsWith('__Host-berth_console='))!
    .split(';')[0]!;

  const target = await databaseFor(path.join(dataDir, 'target'));
  if (!onPostgres) {
    const running = await runBerth(['admin', 'copy-metadata', '--to', target], { BERTH_DATA_DIR: dataDir });
    t.is(running.code, 1);
    t.regex(
      running.stderr,
      /^berth: the data dir .* is in use by another Berth server \(pid \d+\): stop it first, so that nothing changes while its metadata is copied\n$/,
    );
  }
  first.child.kill('SIGTERM');
  t.is(await first.exited, 0);
  const before = onPostgres ? '' : sha256(path.join(dataDir, 'meta.sqlite'));

  const bad = await runBerth(['admin', 'copy-metadata', '--to', 'mysql://somewhere/db'], { BERTH_DATA_DIR: dataDir });
  t.is(bad.code, 2);
  t.regex(bad.stderr, /--to must be the postgres:\/\/ URL of an empty database/);

  const copied = await runBerth(['admin', 'copy-metadata', '--to', target, '--json'], { BERTH_DATA_DIR: dataDir });
  t.is(copied.code, 0, copied.stderr);
  const tables = (JSON.parse(copied.stdout) as { tables: Array<{ table: string; rows: number; checksum: string }> })
    .tables;
  const rows = Object.fromEntries(tables.map((table) => [table.table, table.rows]));
  // users: the owner made on first start, and Ada.
  t.like(rows, {
    accounts: 1,
    sites: 1,
    file_versions: 4,
    functions: 2,
    secrets: 1,
    databases: 1,
    users: 2,
    sessions: 1,
  });
  t.true(tables.every((table) => /^[0-9a-f]{64}$/.test(table.checksum)));
  if (!onPostgres) t.is(sha256(path.join(dataDir, 'meta.sqlite')), before, 'the source is left as it was');

  const again = await runBerth(['admin', 'copy-metadata', '--to', target], { BERTH_DATA_DIR: dataDir });
  t.is(again.code, 1);
  t.regex(again.stderr, /already holds Berth data \(table accounts has rows\): copy into an empty database only/);

  // The same data dir, on the copy.
  const moved = await startServe({ BERTH_DATA_DIR: dataDir, BERTH_DATABASE_URL: target });
  t.teardown(() => void moved.child.kill('SIGKILL'));
  t.false(moved.output().includes('WRITE key'), 'the owner came along: no new one is made');
  const api = apiClient(moved.url, account.writeKey);
  const host = got.extend({
    prefixUrl: moved.url,
    headers: { host: `${site.subdomain}.localhost:${new URL(moved.url).port}` },
    throwHttpErrors: false,
    retry: { limit: 0 },
  });
  t.is((await host.get('')).body, '<h1>two</h1>');
  const versions = json<{ versions: Array<{ id: string }> }>(await api.get(`v0/files/${second.fileId}/versions`));
  t.is(versions.versions.length, 2);
  t.is(versions.versions[0]!.id, second.versionId);
  t.deepEqual(JSON.parse((await host.get('api/secret', { searchParams: { name: 'TOKEN' } })).body), {
    value: 'kept secret',
  });
  const fromDb = await host.post('api/db', { json: { op: 'query', sql: 'SELECT body FROM notes' } });
  t.deepEqual(JSON.parse(fromDb.body), { value: [{ body: 'moved' }] });
  const movedControl = got.extend({
    prefixUrl: moved.url,
    throwHttpErrors: false,
    followRedirect: false,
    retry: { limit: 0 },
  });
  const session = await movedControl.get('session', { headers: { cookie }, responseType: 'json' });
  t.is(session.statusCode, 200, 'a session signed in before the move is still valid');
  t.like((session.body as { user: { email: string } }).user, { email: 'ada@example.com' });
  // Rows numbered by the database (function logs, secret reads) go on after the copied ones.
  t.is((await api.get(`v0/sites/${site.id}/secrets/TOKEN`)).statusCode, 200);
  t.is((await api.get(`v0/sites/${site.id}/secrets/TOKEN`)).statusCode, 200);
  t.is(json<{ accessLogs: unknown[] }>(await api.get(`v0/sites/${site.id}/secret_access_logs`)).accessLogs.length, 3);
});

test('the copy knows every table of the schema, parents before children', async (t) => {
  const dataDir = await makeDataDir(t);
  const metadata = await openMetadata(loadConfig({ BERTH_DATA_DIR: dataDir }));
  t.teardown(() => metadata.close());
  const schema = (await metadata
    .db('sqlite_master')
    .where({ type: 'table' })
    .whereNot('name', 'like', 'knex_%')
    .whereNot('name', 'like', 'sqlite_%')
    .pluck('name')) as string[];
  t.deepEqual(
    TABLES.map((table) => table.name).sort(),
    schema.sort(),
    'a new table is added to TABLES in copy-metadata.ts',
  );
  const order = TABLES.map((table) => table.name);
  for (const table of order) {
    const parents = (await metadata.db.raw(`SELECT "table" AS parent FROM pragma_foreign_key_list(?)`, [
      table,
    ])) as Array<{ parent: string }>;
    for (const { parent } of parents)
      t.true(order.indexOf(parent) < order.indexOf(table), `${parent} comes before ${table}`);
  }
});
