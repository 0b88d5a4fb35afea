// Two-step database deletion and exports: background dumps, signed links, and restarts mid-export.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import test from 'ava';
import Database from 'better-sqlite3';
import got from 'got';
import { startBerth } from '../control-plane/server.ts';
import { type TestBerth, apiClient, createSite, json, putFile, startTestBerth } from './helpers/berth.ts';

let t0: TestBerth;
test.before(async () => {
  t0 = await startTestBerth();
});
test.after.always(async () => {
  await t0?.dispose();
});

async function database(owner = t0) {
  const site = await createSite(owner.owner);
  const db = json<{ database: { id: string } }>(await owner.owner.api.post(`v0/sites/${site.id}/databases`)).database;
  const base = `v0/sites/${site.id}/databases/${db.id}`;
  const query = (sql: string) => owner.owner.api.post(`${base}/query`, { json: { sql } });
  return { site, db, base, query };
}

test('deletion takes a current code of this very database; the bucket’s files stay', async (t) => {
  const { site, db, base } = await database();
  const other = await database();
  await putFile(t0.owner, site.bucketId, 'web/index.html', 'still here', 'text/html');
  const challenge = json<{ confirmationCode: string; expiresAt: string; nextCommand: string }>(
    await t0.owner.api.post(`${base}/deletion-challenges`),
  );
  t.regex(challenge.confirmationCode, /^DELETE-[A-Z0-9]{8}$/);
  const lifetime = Date.parse(challenge.expiresAt) - Date.now();
  t.true(lifetime > 9 * 60_000 && lifetime <= 10 * 60_000);
  t.true(challenge.nextCommand.includes(challenge.confirmationCode));

  const wrong = await t0.owner.api.delete(base, { json: { confirmationCode: 'DELETE-AAAAAAAA' } });
  t.is(wrong.statusCode, 400);
  t.is(json(wrong).error.code, 'invalid_confirmation_code');
  const otherCode = json<{ confirmationCode: string }>(
    await t0.owner.api.post(`${other.base}/deletion-challenges`),
  ).confirmationCode;
  const crossed = await t0.owner.api.delete(base, { json: { confirmationCode: otherCode } });
  t.is(json(crossed).error.code, 'invalid_confirmation_code');
  const stale = json<{ confirmationCode: string }>(
    await t0.owner.api.post(`${base}/deletion-challenges`),
  ).confirmationCode;
  await t0.berth.deps
    .db('database_deletion_challenges')
    .where({ code: stale })
    .update({ expires_at: new Date(Date.now() - 1000).toISOString() });
  const expired = await t0.owner.api.delete(base, { json: { confirmationCode: stale } });
  t.is(json(expired).error.code, 'confirmation_code_expired');
  t.true(fs.existsSync(path.join(t0.dataDir, 'sites', site.id, 'db.sqlite')), 'nothing deleted so far');

  const deleted = await t0.owner.api.delete(base, { json: { confirmationCode: challenge.confirmationCode } });
  t.deepEqual(json(deleted), { deleted: true, databaseId: db.id });
  t.false(fs.existsSync(path.join(t0.dataDir, 'sites', site.id, 'db.sqlite')));
  t.deepEqual(json<{ databases: unknown[] }>(await t0.owner.read.get(`v0/sites/${site.id}/databases`)).databases, []);
  t.is((await t0.owner.api.post(`${base}/query`, { json: { sql: 'SELECT 1' } })).statusCode, 404);
  t.is(
    (await t0.owner.read.get(`v0/buckets/${site.bucketId}/objects/web/index.html`, { responseType: 'text' })).body,
    'still here',
  );
  t.is(
    (await t0.owner.api.post(`${other.base}/query`, { json: { sql: 'SELECT 1' } })).statusCode,
    200,
    'the other database is untouched',
  );
});

function rows(file: string, sql: string): unknown[] {
  const db = new Database(file);
  try {
    return db.prepare(sql).all();
  } finally {
    db.close();
  }
}

test('an export is a signed, expiring SQL dump that rebuilds an equal database', async (t) => {
  const { site, base, query } = await database();
  await query('CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT, big INTEGER, ratio REAL, data BLOB, note TEXT)');
  await query(
    "INSERT INTO things (name, big, ratio, data, note) VALUES ('it''s', 9007199254740993, 0.125, X'00FF10', NULL)",
  );
  await query("INSERT INTO things (name, big, ratio, data, note) VALUES ('line\nbreak', -5, 1e300, NULL, 'é')");
  await query('CREATE INDEX things_name ON things (name)');
  await t0.owner.api.post(`v0/sites/${site.id}`, { json: { status: 'ARCHIVED' } });

  const created = await t0.owner.api.post(`${base}/exports`);
  t.is(created.statusCode, 200, 'archived sites may export');
  const exp = json<{ export: { id: string; status: string } }>(created).export;
  t.is(exp.status, 'PROCESSING');
  let record: { status: string; downloadUrl?: string } = exp;
  for (let i = 0; i < 50 && record.status === 'PROCESSING'; i++) {
    await sleep(50);
    record = json<{ export: typeof record }>(await t0.owner.api.post(`${base}/exports/${exp.id}/reconcile`)).export;
  }
  t.is(record.status, 'COMPLETE');
  const url = record.downloadUrl!;
  t.regex(url, /\/v0\/exports\/[0-9a-f-]+\/download\?expires=\d+&signature=/);

  const download = await got.get(url, { throwHttpErrors: false });
  t.is(download.statusCode, 200, 'no API key needed');
  const restored = path.join(t0.dataDir, 'restored.sqlite');
  const restoredDb = new Database(restored);
  try {
    restoredDb.exec(download.body);
  } finally {
    restoredDb.close();
  }
  const original = path.join(t0.dataDir, 'sites', site.id, 'db.sqlite');
  const compare = 'SELECT id, quote(name), quote(big), quote(ratio), quote(data), quote(note) FROM things ORDER BY id';
  t.deepEqual(rows(restored, compare), rows(original, compare));
  t.deepEqual(rows(restored, "SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'things_name'"), [
    { name: 'things_name' },
  ]);

  // Another first character, whatever the signature's was (1 in 64 begin with "A").
  const tampered = await got.get(
    url.replace(/signature=(.)/, (_all, first: string) => `signature=${first === 'A' ? 'B' : 'A'}`),
    { throwHttpErrors: false },
  );
  t.is(tampered.statusCode, 403);
  t.is(JSON.parse(tampered.body).error.code, 'invalid_download_link');
  const past = Math.floor(Date.now() / 1000) - 60;
  const signature = crypto
    .createHmac('sha256', t0.berth.deps.masterKey)
    .update(`export:${exp.id}:${past}`)
    .digest('base64url');
  const expired = await got.get(`${t0.url}/v0/exports/${exp.id}/download?expires=${past}&signature=${signature}`, {
    throwHttpErrors: false,
  });
  t.is(expired.statusCode, 403);
  t.is(JSON.parse(expired.body).error.code, 'download_link_expired');

  const listed = json<{ exports: Array<{ id: string; status: string }> }>(
    await t0.owner.read.get(`${base}/exports`),
  ).exports;
  t.deepEqual(
    listed.map((e) => [e.id, e.status]),
    [[exp.id, 'COMPLETE']],
  );
});

test('one export at a time; a restart mid-export ends it in ERROR, kept in the list', async (t) => {
  const own = await startTestBerth();
  t.teardown(() => own.dispose());
  const { db, base } = await database(own);
  const now = new Date().toISOString();
  const stuck = crypto.randomUUID();
  const site = await own.berth.deps.db('databases').where({ id: db.id }).first();
  await own.berth.deps
    .db('database_exports')
    .insert({ id: stuck, database_id: db.id, site_id: site.site_id, status: 'PROCESSING', created_at: now });
  const second = await own.owner.api.post(`${base}/exports`);
  t.is(second.statusCode, 409);
  t.is(json(second).error.code, 'export_in_progress');

  await own.berth.close();
  const again = await startBerth(own.config);
  t.teardown(() => again.close());
  const api = apiClient(again.url, own.owner.writeKey);
  const record = json<{ export: { status: string; error: string } }>(
    await api.post(`${base}/exports/${stuck}/reconcile`),
  ).export;
  t.is(record.status, 'ERROR');
  t.regex(record.error, /interrupted/);
  t.is((await api.post(`${base}/exports`)).statusCode, 200, 'a new export can start');
  const listed = json<{ exports: Array<{ id: string; status: string }> }>(await api.get(`${base}/exports`)).exports;
  t.true(listed.some((e) => e.id === stuck && e.status === 'ERROR'));
});
