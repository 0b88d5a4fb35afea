// The hot statements' port (control-plane/db/hot-sql.ts), held to one contract on every adapter this
// process can reach: the lookups every request runs, as the services run them; a write as one
// transaction, durable when it resolves and rolled back whole when it fails; what `run` counts when a
// conditional statement loses; getForUpdate (and a batch's locking statement) making two writers of one
// row take turns, whether the second waits on the row (PostgreSQL) or on the one writer (SQLite); a
// batch run in order as one round trip, the statements left for the commit sent with it, and what the
// port counts as round trips.
import crypto from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import type { Knex } from 'knex';
import { BerthError } from '../../control-plane/errors.ts';
import { DEFAULTS } from '../../control-plane/config.ts';
import { isUniqueViolation } from '../../control-plane/db/errors.ts';
import { type HotTx, lockingStatement, statement } from '../../control-plane/db/hot-sql.ts';
import type { Actor } from '../../control-plane/deps.ts';
import { requireBucket } from '../../control-plane/services/buckets.ts';
import { requireDatabase } from '../../control-plane/services/site-rows.ts';
import {
  FILE_COLUMNS,
  type FileRow,
  VERSION_COLUMNS,
  findCurrentFile,
} from '../../control-plane/services/file-rows.ts';
import { authenticate, createKey, revokeKey } from '../../control-plane/services/keys.ts';
import { requireSite, siteOfBucket } from '../../control-plane/services/site-rows.ts';
import { StorageQuota, chargeVersion, releaseVersion } from '../../control-plane/services/storage-quota.ts';
import { type MetadataBackend, type OpenedMetadata, eachMetadataBackend } from '../helpers/each-adapter.ts';
import { seedDatabase, seedFile, seedSite, sha256 } from '../helpers/metadata-rows.ts';
import { until } from '../helpers/until.ts';

const FILE_AT_PATH = `SELECT ${FILE_COLUMNS} FROM files WHERE bucket_id = ? AND path = ?`;
const FILE_BY_ID = `SELECT ${FILE_COLUMNS} FROM files WHERE id = ?`;

async function open(t: ExecutionContext, backend: MetadataBackend): Promise<OpenedMetadata> {
  const opened = await backend.open();
  t.teardown(opened.close);
  return opened;
}

const actorOf = (accountId: string): Actor => ({ via: 'key', accountId, permission: 'WRITE', id: 'contract' });

/** A promise a test resolves when it chooses: what a transaction in flight waits on. */
function gate(): { opened: Promise<void>; open(): void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/** A new version of the file, numbered after its last, made current: the statements a file write commits. */
async function addVersion(tx: HotTx, fileId: string, text: string): Promise<string> {
  const id = crypto.randomUUID();
  const now = new Date().toISOString();
  await tx.run(
    `INSERT INTO file_versions (id, file_id, blob_sha256, bytes, content_type, restored_from_version_id, created_at, seq)
     VALUES (?, ?, ?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM file_versions WHERE file_id = ?))`,
    id,
    fileId,
    sha256(text),
    text.length,
    'text/plain',
    null,
    now,
    fileId,
  );
  await tx.run('UPDATE files SET current_version_id = ?, updated_at = ? WHERE id = ?', id, now, fileId);
  return id;
}

/** The file's row at `path`, made if missing, locked: how a write of a path begins. */
async function fileForWrite(tx: HotTx, bucketId: string, path: string): Promise<FileRow> {
  const file = await tx.getForUpdate<FileRow>(FILE_AT_PATH, bucketId, path);
  if (file) return file;
  const now = new Date().toISOString();
  await tx.run(
    'INSERT INTO files (id, bucket_id, path, current_version_id, created_at, updated_at) VALUES (?, ?, ?, NULL, ?, ?) ON CONFLICT (bucket_id, path) DO NOTHING',
    crypto.randomUUID(),
    bucketId,
    path,
    now,
    now,
  );
  return (await tx.getForUpdate<FileRow>(FILE_AT_PATH, bucketId, path))!;
}

/** The numbers of the file's versions, in order. */
/** A version numbered 1 of the file: refused by the unique (file_id, seq) once the file has one. */
const versionOne = (fileId: string) =>
  statement(
    'INSERT INTO file_versions (id, file_id, blob_sha256, bytes, content_type, restored_from_version_id, created_at, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    crypto.randomUUID(),
    fileId,
    sha256('dup'),
    3,
    'text/plain',
    null,
    new Date().toISOString(),
    1,
  );

const seqs = async (db: Knex, fileId: string) =>
  (await db('file_versions').where({ file_id: fileId }).orderBy('seq').select('seq')).map((r) => Number(r.seq));

/** Waits until a second transaction is held up by the one in flight. */
const untilWaiting = (opened: OpenedMetadata) =>
  until(async () => (await opened.waiting()) > 0, 'a second transaction waiting for the first');

for (const backend of eachMetadataBackend()) {
  const name = `[${backend.name}]`;

  test(`${name} the lookups services run find a key, a bucket, a site, a database and a current file, and nothing of another account`, async (t) => {
    const { metadata } = await open(t, backend);
    const { db, hot } = metadata;
    const deps = { hotSql: hot };
    const site = await seedSite(db);
    const stranger = actorOf((await seedSite(db)).accountId);
    const actor = actorOf(site.accountId);
    const store = { db, now: () => new Date() };

    const key = await createKey(store, { accountId: site.accountId, permission: 'READ', forCli: true });
    t.deepEqual(await authenticate(deps, key.key), {
      via: 'cli',
      accountId: site.accountId,
      id: key.id,
      permission: 'READ',
    });
    const plain = await createKey(store, { accountId: site.accountId, permission: 'WRITE' });
    t.is((await authenticate(deps, plain.key))?.via, 'key', 'a key not made for the CLI reads as one');
    await revokeKey(store, key.id);
    t.is(await authenticate(deps, key.key), null, 'a revoked key stops at once');
    t.is(await authenticate(deps, `${key.key}x`), null);

    t.like(await requireBucket(deps, actor, site.bucketId), { id: site.bucketId, account_id: site.accountId });
    const bucketOfStranger = await t.throwsAsync(requireBucket(deps, stranger, site.bucketId));
    t.is((bucketOfStranger as BerthError).code, 'not_found');
    t.like(await requireSite(deps, actor, site.siteId), {
      id: site.siteId,
      subdomain: site.subdomain,
      reconcile_report: null,
    });
    t.is(((await t.throwsAsync(requireSite(deps, stranger, site.siteId))) as BerthError).code, 'not_found');
    t.is((await siteOfBucket(deps, site.bucketId))?.id, site.siteId);
    t.is(await siteOfBucket(deps, crypto.randomUUID()), undefined);

    const databaseId = await seedDatabase(db, site.siteId, 'node-a');
    t.like(await requireDatabase(deps, actor, site.siteId, databaseId), { id: databaseId, node_id: 'node-a' });
    t.is(
      ((await t.throwsAsync(requireDatabase(deps, actor, site.siteId, crypto.randomUUID()))) as BerthError).code,
      'not_found',
    );

    const big = 5 * 1024 ** 3;
    await seedFile(db, site.bucketId, 'index.html', [
      { sha256: sha256('old'), bytes: 3 },
      { sha256: sha256('big'), bytes: big },
    ]);
    const found = await findCurrentFile(deps, site.bucketId, 'index.html');
    t.is(found?.sha256, sha256('big'), 'the current version is the last one');
    t.is(found?.file.bytes, big, 'a size past 32 bits reads as the same number');
    t.is(typeof found?.file.bytes, 'number');
    const deleted = await seedFile(db, site.bucketId, 'gone.html', [{ sha256: sha256('gone'), bytes: 4 }]);
    await db('files').where({ id: deleted.fileId }).update({ current_version_id: null });
    t.is(await findCurrentFile(deps, site.bucketId, 'gone.html'), null, 'a deleted file has no current version');
    t.is(await findCurrentFile(deps, site.bucketId, 'missing.html'), null);

    await db('accounts')
      .where({ id: site.accountId })
      .update({ storage_used_bytes: big, storage_limit_bytes: 2 * big });
    t.deepEqual(await new StorageQuota(DEFAULTS, hot).usage(site.accountId), { usedBytes: big, limitBytes: 2 * big });
  });

  test(`${name} a read sees committed data only and does not wait for a write in flight`, async (t) => {
    const { metadata } = await open(t, backend);
    const { db, hot } = metadata;
    const site = await seedSite(db);
    const { fileId, versionIds } = await seedFile(db, site.bucketId, 'a.txt', [{ sha256: sha256('one'), bytes: 3 }]);
    const current = () => hot.get<FileRow>(FILE_BY_ID, fileId).then((row) => row?.current_version_id);

    const inFlight = gate();
    const wrote = gate();
    const writing = hot.write(async (tx) => {
      const id = await addVersion(tx, fileId, 'two');
      t.is((await tx.get<FileRow>(FILE_BY_ID, fileId))?.current_version_id, id, 'a transaction reads its own writes');
      wrote.open();
      await inFlight.opened;
      return id;
    });
    await wrote.opened;
    t.is(await current(), versionIds[0], 'a write in flight is not seen');
    inFlight.open();
    const second = await writing;
    t.is(await current(), second, 'a resolved write is seen by the next read');
  });

  test(`${name} a write resolves with what its work returns, and its statements see their own rows`, async (t) => {
    const { metadata } = await open(t, backend);
    const { db, hot } = metadata;
    const site = await seedSite(db);
    const result = await hot.write(async (tx) => {
      const file = await fileForWrite(tx, site.bucketId, 'new.txt');
      t.is(file.current_version_id, null);
      await addVersion(tx, file.id, 'a');
      await addVersion(tx, file.id, 'bb');
      const versions = await tx.all<{ seq: number; bytes: number }>(
        `SELECT seq, bytes FROM file_versions WHERE file_id = ? ORDER BY seq`,
        file.id,
      );
      t.deepEqual(versions, [
        { seq: 1, bytes: 1 },
        { seq: 2, bytes: 2 },
      ]);
      t.deepEqual(await tx.all('SELECT id FROM file_versions WHERE file_id = ?', 'none'), []);
      t.is(await tx.get('SELECT id FROM files WHERE id = ?', 'none'), undefined);
      return { fileId: file.id };
    });
    t.like(await hot.get<FileRow>(FILE_BY_ID, result.fileId), { path: 'new.txt' });
    const count = await hot.get<{ n: number }>(
      'SELECT COUNT(id) AS n FROM file_versions WHERE file_id = ?',
      result.fileId,
    );
    t.deepEqual(count, { n: 2 }, 'a count reads as a number');
  });

  test(`${name} a write whose work throws keeps nothing and rejects with that error`, async (t) => {
    const { metadata } = await open(t, backend);
    const { db, hot } = metadata;
    const site = await seedSite(db);
    const { fileId, versionIds } = await seedFile(db, site.bucketId, 'a.txt', [{ sha256: sha256('one'), bytes: 3 }]);
    const refused = new BerthError('version_conflict', 'refused by the work');
    const thrown = await t.throwsAsync(
      hot.write(async (tx) => {
        await addVersion(tx, fileId, 'two');
        await tx.run('UPDATE sites SET name = ? WHERE id = ?', 'renamed', site.siteId);
        throw refused;
      }),
    );
    t.is(thrown, refused);
    t.is((await hot.get<FileRow>(FILE_BY_ID, fileId))?.current_version_id, versionIds[0]);
    t.deepEqual(await hot.get('SELECT COUNT(id) AS n FROM file_versions WHERE file_id = ?', fileId), { n: 1 });
    t.is((await requireSite({ hotSql: hot }, actorOf(site.accountId), site.siteId)).name, 'Contract');
    await hot.write((tx) => addVersion(tx, fileId, 'three'));
    t.deepEqual(await hot.get('SELECT COUNT(id) AS n FROM file_versions WHERE file_id = ?', fileId), { n: 2 });
  });

  test(`${name} a statement a unique constraint refuses fails the write as a unique violation, and the next write runs`, async (t) => {
    const { metadata } = await open(t, backend);
    const { db, hot } = metadata;
    const site = await seedSite(db);
    const { fileId } = await seedFile(db, site.bucketId, 'a.txt', [{ sha256: sha256('one'), bytes: 3 }]);
    const insert = versionOne(fileId);
    const duplicate = await t.throwsAsync(hot.write((tx) => tx.run(insert.sql, ...insert.params)));
    t.true(isUniqueViolation(duplicate), `a unique violation: ${String(duplicate)}`);
    const added = await hot.write((tx) => addVersion(tx, fileId, 'two'));
    t.is((await hot.get<FileRow>(FILE_BY_ID, fileId))?.current_version_id, added);
  });

  test(`${name} run counts what a statement changed: nothing for a conditional update that loses or an insert that conflicts`, async (t) => {
    const { metadata } = await open(t, backend);
    const { db, hot } = metadata;
    const site = await seedSite(db);
    const { fileId, versionIds } = await seedFile(db, site.bucketId, 'a.txt', [
      { sha256: sha256('one'), bytes: 3 },
      { sha256: sha256('two'), bytes: 3 },
    ]);
    const now = new Date().toISOString();
    const swap = (tx: HotTx, expected: string | null, next: string) =>
      tx.run(
        'UPDATE files SET current_version_id = ?, updated_at = ? WHERE id = ? AND current_version_id IS NOT DISTINCT FROM ?',
        next,
        now,
        fileId,
        expected,
      );
    const outcome = await hot.write(async (tx) => ({
      stale: await swap(tx, versionIds[0]!, versionIds[0]!),
      missing: await swap(tx, null, versionIds[0]!),
      won: await swap(tx, versionIds[1]!, versionIds[0]!),
      conflict: await tx.run(
        'INSERT INTO files (id, bucket_id, path, current_version_id, created_at, updated_at) VALUES (?, ?, ?, NULL, ?, ?) ON CONFLICT (bucket_id, path) DO NOTHING',
        crypto.randomUUID(),
        site.bucketId,
        'a.txt',
        now,
        now,
      ),
      noRow: await tx.run('UPDATE files SET updated_at = ? WHERE id = ?', now, crypto.randomUUID()),
      returnedNothing: await tx.get(
        'UPDATE account_blobs SET versions = versions - 1 WHERE account_id = ? AND blob_sha256 = ? RETURNING bytes, versions',
        site.accountId,
        sha256('none'),
      ),
      deleted: await tx.run(
        'DELETE FROM file_versions WHERE file_id = ? AND id IS DISTINCT FROM ?',
        fileId,
        versionIds[0]!,
      ),
    }));
    t.deepEqual(outcome, {
      stale: { changes: 0 },
      missing: { changes: 0 },
      won: { changes: 1 },
      conflict: { changes: 0 },
      noRow: { changes: 0 },
      returnedNothing: undefined,
      deleted: { changes: 1 },
    });
    t.is((await hot.get<FileRow>(FILE_BY_ID, fileId))?.current_version_id, versionIds[0]);
  });

  test(`${name} a version's bytes count once per blob, and a write past the limit is refused with nothing counted`, async (t) => {
    const { metadata } = await open(t, backend);
    const { db, hot } = metadata;
    const site = await seedSite(db, { storageLimitBytes: 100 });
    const usage = () => new StorageQuota(DEFAULTS, hot).usage(site.accountId);
    const charge = (blob: string, bytes: number) =>
      hot.write((tx) => chargeVersion(tx, DEFAULTS, site.accountId, sha256(blob), bytes));

    await charge('a', 60);
    await charge('a', 60);
    t.deepEqual(await usage(), { usedBytes: 60, limitBytes: 100 }, 'a second version of one blob costs nothing');
    const refused = (await t.throwsAsync(charge('b', 50))) as BerthError;
    t.is(refused.code, 'quota_exceeded');
    t.deepEqual(refused.details, { usedBytes: 60, limitBytes: 100, neededBytes: 50 });
    t.deepEqual(await usage(), { usedBytes: 60, limitBytes: 100 });
    t.is(
      await hot.get(
        'SELECT versions FROM account_blobs WHERE account_id = ? AND blob_sha256 = ?',
        site.accountId,
        sha256('b'),
      ),
      undefined,
      'the refused write counted nothing',
    );
    await charge('b', 40);
    t.deepEqual(await usage(), { usedBytes: 100, limitBytes: 100 }, 'the last free byte can be taken');

    const release = (blob: string) => hot.write((tx) => releaseVersion(tx, site.accountId, sha256(blob)));
    t.is(await release('a'), 0, 'a blob another version holds frees nothing');
    t.is(await release('a'), 60);
    t.is(await release('a'), 0, 'a blob no longer counted frees nothing');
    t.deepEqual(await usage(), { usedBytes: 40, limitBytes: 100 });
  });

  test(`${name} getForUpdate holds the row until the transaction ends`, async (t) => {
    const opened = await open(t, backend);
    const { db, hot } = opened.metadata;
    const site = await seedSite(db);
    const { fileId, versionIds } = await seedFile(db, site.bucketId, 'a.txt', [{ sha256: sha256('one'), bytes: 3 }]);

    const holding = gate();
    const release = gate();
    // A test that fails while the first transaction holds its row must not hold the metadata open too.
    t.teardown(release.open);
    const events: string[] = [];
    const first = hot.write(async (tx) => {
      const file = await tx.getForUpdate<FileRow>(FILE_BY_ID, fileId);
      holding.open();
      await release.opened;
      const id = await addVersion(tx, file!.id, 'two');
      events.push('first commits');
      return id;
    });
    await holding.opened;
    const second = hot.write(async (tx) => {
      const file = await tx.getForUpdate<FileRow>(FILE_BY_ID, fileId);
      events.push('second has the row');
      return { seen: file!.current_version_id, id: await addVersion(tx, fileId, 'three') };
    });
    await untilWaiting(opened);
    t.deepEqual(events, [], 'the second transaction waits');
    release.open();
    const firstId = await first;
    const { seen, id } = await second;
    t.deepEqual(events, ['first commits', 'second has the row']);
    t.not(firstId, versionIds[0]);
    t.is(seen, firstId, 'the second reads the row as the first committed it');
    t.deepEqual(await hot.get<FileRow>(FILE_BY_ID, fileId).then((f) => f?.current_version_id), id);
    t.deepEqual(await seqs(db, fileId), [1, 2, 3]);
  });

  test(`${name} a row getForUpdate holds is free again once its transaction rolls back`, async (t) => {
    const opened = await open(t, backend);
    const { db, hot } = opened.metadata;
    const site = await seedSite(db);
    const { fileId, versionIds } = await seedFile(db, site.bucketId, 'a.txt', [{ sha256: sha256('one'), bytes: 3 }]);

    const holding = gate();
    const release = gate();
    // A test that fails while the first transaction holds its row must not hold the metadata open too.
    t.teardown(release.open);
    const first = hot.write(async (tx) => {
      await tx.getForUpdate<FileRow>(FILE_BY_ID, fileId);
      await addVersion(tx, fileId, 'two');
      holding.open();
      await release.opened;
      throw new Error('given up');
    });
    await holding.opened;
    const second = hot.write((tx) => tx.getForUpdate<FileRow>(FILE_BY_ID, fileId));
    await untilWaiting(opened);
    release.open();
    await t.throwsAsync(first, { message: 'given up' });
    t.is((await second)?.current_version_id, versionIds[0], 'the second sees the row as it was before');
    t.deepEqual(await seqs(db, fileId), [1]);
  });

  test(`${name} getForUpdate finds nothing once the transaction it waited for deleted the row`, async (t) => {
    const opened = await open(t, backend);
    const { db, hot } = opened.metadata;
    const site = await seedSite(db);
    const { fileId } = await seedFile(db, site.bucketId, 'a.txt', [{ sha256: sha256('one'), bytes: 3 }]);
    await db('files').where({ id: fileId }).update({ current_version_id: null });

    const holding = gate();
    const release = gate();
    // A test that fails while the first transaction holds its row must not hold the metadata open too.
    t.teardown(release.open);
    const first = hot.write(async (tx) => {
      await tx.getForUpdate<FileRow>(FILE_BY_ID, fileId);
      holding.open();
      await release.opened;
      await tx.run('DELETE FROM file_versions WHERE file_id = ?', fileId);
      return tx.run('DELETE FROM files WHERE id = ?', fileId);
    });
    await holding.opened;
    const second = hot.write((tx) => tx.getForUpdate<FileRow>(FILE_BY_ID, fileId));
    await untilWaiting(opened);
    release.open();
    t.deepEqual(await first, { changes: 1 });
    t.is(await second, undefined);
  });

  test(`${name} two first writes of one path meet on one file row, numbered one after the other`, async (t) => {
    const opened = await open(t, backend);
    const { db, hot } = opened.metadata;
    const site = await seedSite(db);

    const inserted = gate();
    const release = gate();
    // A test that fails while the first transaction holds its row must not hold the metadata open too.
    t.teardown(release.open);
    const first = hot.write(async (tx) => {
      const file = await fileForWrite(tx, site.bucketId, 'race.txt');
      inserted.open();
      await release.opened;
      await addVersion(tx, file.id, 'first');
      return file.id;
    });
    await inserted.opened;
    // On PostgreSQL this one does not see the first's row yet, and waits on its insert instead.
    const second = hot.write(async (tx) => {
      const file = await fileForWrite(tx, site.bucketId, 'race.txt');
      await addVersion(tx, file.id, 'second');
      return file.id;
    });
    await untilWaiting(opened);
    release.open();
    const fileId = await first;
    t.is(await second, fileId);
    t.deepEqual(await seqs(db, fileId), [1, 2]);
  });

  test(`${name} a batch runs its statements in the order of their names as one round trip, each seeing those before it`, async (t) => {
    const { metadata } = await open(t, backend);
    const { db, hot } = metadata;
    const site = await seedSite(db);
    const { fileId, versionIds } = await seedFile(db, site.bucketId, 'a.txt', [{ sha256: sha256('one'), bytes: 3 }]);
    const now = new Date().toISOString();
    const newId = crypto.randomUUID();
    const before = hot.roundTrips;
    const answers = await hot.write((tx) =>
      tx.batch({
        made: statement(
          `INSERT INTO files (id, bucket_id, path, current_version_id, created_at, updated_at) VALUES (?, ?, ?, NULL, ?, ?) RETURNING ${FILE_COLUMNS}`,
          newId,
          site.bucketId,
          'b.txt',
          now,
          now,
        ),
        skipped: undefined,
        counted: statement('SELECT COUNT(id) AS n FROM files WHERE bucket_id = ?', site.bucketId),
        moved: statement(
          'UPDATE files SET updated_at = ? WHERE bucket_id = ? AND current_version_id IS NULL',
          now,
          site.bucketId,
        ),
        locked: lockingStatement(FILE_BY_ID, fileId),
      }),
    );
    t.is(hot.roundTrips - before, 2, 'the batch, and the commit');
    t.deepEqual(Object.keys(answers), ['made', 'skipped', 'counted', 'moved', 'locked']);
    t.like(answers.made.rows[0], { id: newId, path: 'b.txt', current_version_id: null });
    t.is(answers.made.changes, 1);
    t.deepEqual(answers.skipped, { rows: [], changes: 0 }, 'a statement left out reads as nothing');
    t.deepEqual(answers.counted.rows, [{ n: 2 }], 'the count sees the row inserted before it');
    t.is(answers.moved.changes, 1, 'the update meets the row inserted before it');
    t.like(answers.locked.rows[0], { id: fileId, current_version_id: versionIds[0] });
    t.like(await hot.get<FileRow>(FILE_BY_ID, newId), { path: 'b.txt' });
  });

  test(`${name} the first statement of a batch that fails rejects it with its error, and nothing of the write is kept`, async (t) => {
    const { metadata } = await open(t, backend);
    const { db, hot } = metadata;
    const site = await seedSite(db);
    await seedFile(db, site.bucketId, 'a.txt', [{ sha256: sha256('one'), bytes: 3 }]);
    const now = new Date().toISOString();
    const insert = (id: string, path: string) =>
      statement(
        'INSERT INTO files (id, bucket_id, path, current_version_id, created_at, updated_at) VALUES (?, ?, ?, NULL, ?, ?)',
        id,
        site.bucketId,
        path,
        now,
        now,
      );
    const [first, after] = [crypto.randomUUID(), crypto.randomUUID()];
    let ranOn = false;
    const refused = await t.throwsAsync(
      hot.write(async (tx) => {
        await tx.batch({
          first: insert(first, 'b.txt'),
          duplicate: insert(crypto.randomUUID(), 'a.txt'),
          after: insert(after, 'c.txt'),
        });
        ranOn = true;
      }),
    );
    t.true(isUniqueViolation(refused), `a unique violation: ${String(refused)}`);
    t.false(ranOn, 'the work stops at the failed batch');
    t.is(await hot.get(FILE_BY_ID, first), undefined, 'the statement before the failure is rolled back');
    t.is(await hot.get(FILE_BY_ID, after), undefined, 'the statement after it changed nothing');
    t.is(
      await hot.write((tx) => tx.get('SELECT id FROM files WHERE id = ?', 'none')),
      undefined,
      'the next write runs',
    );
  });

  test(`${name} statements left for the commit run after the rest, with the commit; one that fails rolls the write back, and what runs after a commit runs only then`, async (t) => {
    const { metadata } = await open(t, backend);
    const { db, hot } = metadata;
    const site = await seedSite(db);
    const { fileId } = await seedFile(db, site.bucketId, 'a.txt', [{ sha256: sha256('one'), bytes: 3 }]);
    const version = (text: string) =>
      statement(
        `INSERT INTO file_versions (id, file_id, blob_sha256, bytes, content_type, restored_from_version_id, created_at, seq)
         VALUES (?, ?, ?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM file_versions WHERE file_id = ?))`,
        crypto.randomUUID(),
        fileId,
        sha256(text),
        text.length,
        'text/plain',
        null,
        new Date().toISOString(),
        fileId,
      );
    const events: string[] = [];
    const before = hot.roundTrips;
    await hot.write(async (tx) => {
      tx.commitWith(version('last'));
      tx.afterCommit(() => events.push('after commit'));
      await addVersion(tx, fileId, 'second');
      events.push('work done');
    });
    events.push('write resolved');
    t.is(hot.roundTrips - before, 3, 'two statements awaited, and the commit with the statement left for it');
    t.deepEqual(events, ['work done', 'after commit', 'write resolved']);
    t.deepEqual(
      await db('file_versions').where({ file_id: fileId }).orderBy('seq').pluck('bytes'),
      [3, 6, 4],
      'the statement left for the commit ran after the work’s own',
    );

    const duplicate = versionOne(fileId);
    const refused = await t.throwsAsync(
      hot.write(async (tx) => {
        await addVersion(tx, fileId, 'kept?');
        tx.commitWith(duplicate, version('after'));
        tx.afterCommit(() => events.push('after a failed commit'));
      }),
    );
    t.true(isUniqueViolation(refused), `a unique violation: ${String(refused)}`);
    t.deepEqual(await seqs(db, fileId), [1, 2, 3], 'nothing of the failed write is kept');
    t.false(events.includes('after a failed commit'));
    await hot.write((tx) => addVersion(tx, fileId, 'next'));
    t.deepEqual(await seqs(db, fileId), [1, 2, 3, 4], 'the next write runs');
  });

  test(`${name} round trips: a read is one, and a write one per statement or batch it waits for and one for its commit`, async (t) => {
    const { metadata } = await open(t, backend);
    const { db, hot } = metadata;
    const site = await seedSite(db);
    const { fileId } = await seedFile(db, site.bucketId, 'a.txt', [{ sha256: sha256('one'), bytes: 3 }]);
    const trips = async (work: () => Promise<unknown>) => {
      const before = hot.roundTrips;
      await work();
      return hot.roundTrips - before;
    };
    t.is(await trips(() => hot.get(FILE_BY_ID, fileId)), 1);
    t.is(await trips(() => hot.write(async () => undefined)), 0, 'a write that sends nothing has nothing to commit');
    t.is(await trips(() => hot.write((tx) => addVersion(tx, fileId, 'two'))), 3);
    t.is(
      await trips(() =>
        hot.write(async (tx) => {
          tx.commitWith(statement('UPDATE files SET updated_at = ? WHERE id = ?', new Date().toISOString(), fileId));
        }),
      ),
      1,
      'a write of statements left for the commit is the commit alone',
    );
  });

  test(`${name} a statement that failed the first time it was sent on a connection runs the next time`, async (t) => {
    // Whether it failed being prepared or being run, the connection prepares it again.
    const { metadata } = await open(t, backend);
    const { db, hot } = metadata;
    const site = await seedSite(db);
    const { fileId } = await seedFile(db, site.bucketId, 'a.txt', [{ sha256: sha256('one'), bytes: 3 }]);
    const now = new Date().toISOString();
    await t.throwsAsync(
      hot.write((tx) => tx.batch({ unknown: statement('SELECT no_such_column FROM files WHERE id = ?', fileId) })),
    );
    const insert = (id: string, path: string) =>
      hot.write((tx) =>
        tx.run(
          'INSERT INTO files (id, bucket_id, path, current_version_id, created_at, updated_at) VALUES (?, ?, ?, NULL, ?, ?)',
          id,
          site.bucketId,
          path,
          now,
          now,
        ),
      );
    const refused = await t.throwsAsync(insert(crypto.randomUUID(), 'a.txt'));
    t.true(isUniqueViolation(refused), `a unique violation: ${String(refused)}`);
    const id = crypto.randomUUID();
    t.deepEqual(await insert(id, 'b.txt'), { changes: 1 });
    t.like(await hot.get<FileRow>(FILE_BY_ID, id), { path: 'b.txt' });
    t.like(await hot.get<FileRow>(FILE_BY_ID, fileId), { path: 'a.txt' }, 'reads run on the connection as before');
  });

  test(`${name} a batch's locking statement holds its row until the transaction ends`, async (t) => {
    const opened = await open(t, backend);
    const { db, hot } = opened.metadata;
    const site = await seedSite(db);
    const { fileId } = await seedFile(db, site.bucketId, 'a.txt', [{ sha256: sha256('one'), bytes: 3 }]);

    const holding = gate();
    const release = gate();
    // A test that fails while the first transaction holds its row must not hold the metadata open too.
    t.teardown(release.open);
    const events: string[] = [];
    const first = hot.write(async (tx) => {
      await tx.batch({ file: lockingStatement(FILE_BY_ID, fileId) });
      holding.open();
      await release.opened;
      const id = await addVersion(tx, fileId, 'two');
      events.push('first commits');
      return id;
    });
    await holding.opened;
    const second = hot.write(async (tx) => {
      const { file } = await tx.batch({ file: lockingStatement(FILE_BY_ID, fileId) });
      events.push('second has the row');
      return (file.rows[0] as FileRow).current_version_id;
    });
    await untilWaiting(opened);
    t.deepEqual(events, [], 'the second transaction waits');
    release.open();
    const firstId = await first;
    t.is(await second, firstId, 'the second reads the row as the first committed it');
    t.deepEqual(events, ['first commits', 'second has the row']);
  });

  test(`${name} null and text parameters bind as the columns they are compared with`, async (t) => {
    const { metadata } = await open(t, backend);
    const { db, hot } = metadata;
    const site = await seedSite(db);
    const { fileId, versionIds } = await seedFile(db, site.bucketId, 'a.txt', [
      { sha256: sha256('one'), bytes: 3 },
      { sha256: sha256('two'), bytes: 3 },
    ]);
    // What pruning a file's history selects: every version but the current one (none: all of them).
    const others = (current: string | null) =>
      hot.write((tx) =>
        tx.all<{ id: string }>(
          `SELECT ${VERSION_COLUMNS} FROM file_versions WHERE file_id = ? AND id IS DISTINCT FROM ? AND id NOT IN (SELECT deployed_version_id FROM functions WHERE deployed_version_id IS NOT NULL) ORDER BY seq`,
          fileId,
          current,
        ),
      );
    t.deepEqual(
      (await others(versionIds[1]!)).map((v) => v.id),
      [versionIds[0]],
    );
    t.deepEqual(
      (await others(null)).map((v) => v.id),
      versionIds,
    );
  });

  test(`${name} a hot statement that selects * is refused before it runs`, async (t) => {
    const { metadata } = await open(t, backend);
    const { hot } = metadata;
    const named = { message: /names its columns/ };
    await t.throwsAsync(hot.get('SELECT * FROM files WHERE id = ?', 'x'), named);
    await t.throwsAsync(
      hot.write((tx) => tx.getForUpdate('SELECT files.* FROM files WHERE id = ?', 'x')),
      named,
    );
    t.is(await hot.write((tx) => tx.get('SELECT id FROM files WHERE id = ?', 'x')), undefined, 'the next write runs');
  });
}
