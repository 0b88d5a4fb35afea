// `berth admin backup` and `restore` with the site databases' replicas: carried in the archive when
// they are in a folder (the embedded defaults), pointed at when they are in the object store (the
// shared backends). A restore brings each database to the latest replicated moment, past the archive's
// snapshot of it; --as-archived keeps the snapshot.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import test from 'ava';
import Database from 'better-sqlite3';
import { type TestAccount, apiClient, json, makeDataDir } from './helpers/berth.ts';
import { siteWithDatabase } from './helpers/databases.ts';
import { bucketOf, onObjectStore } from './helpers/object-store.ts';
import { runBerth, startServe } from './helpers/process.ts';
import { ownerOf, stopServed } from './helpers/served.ts';
import { until } from './helpers/until.ts';

/** Waits until the replica holds every write made up to now. */
async function replicated(owner: TestAccount, base: string): Promise<void> {
  const now = Date.now();
  await until(async () => {
    const points = json<{ latest: string | null }>(await owner.read.get(`${base}/restore-points`));
    return points.latest !== null && Date.parse(points.latest) >= Math.floor(now / 1000) * 1000;
  }, 'the writes to reach the replica');
}

const notesIn = (file: string): string[] => {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return db
      .prepare<[], { body: string }>('SELECT body FROM notes ORDER BY id')
      .all()
      .map((r) => r.body);
  } finally {
    db.close();
  }
};

test('a restore brings each site database to its latest replicated moment; --as-archived keeps the snapshot', async (t) => {
  t.timeout(300_000);
  const root = await makeDataDir(t);
  const dataDir = path.join(root, 'data');
  const server = await startServe({ BERTH_DATA_DIR: dataDir });
  t.teardown(() => void server.child.kill('SIGKILL'));
  const owner = ownerOf(server);
  const { site, db, base, query } = await siteWithDatabase(owner);
  t.is((await query('CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)')).status, 200);
  for (const body of ['early 1', 'early 2']) await query('INSERT INTO notes (body) VALUES (?)', [body]);
  await replicated(owner, base);

  const archive = path.join(root, 'backups', 'berth.tar');
  await fsp.mkdir(path.dirname(archive));
  const backup = await runBerth(['admin', 'backup', archive, '--without-master-key', '--json'], {
    BERTH_DATA_DIR: dataDir,
  });
  t.is(backup.code, 0, backup.stderr);
  const report = (
    JSON.parse(backup.stdout) as {
      backup: { replicas: unknown; replicaFiles: number; databaseSnapshots: Record<string, string> };
    }
  ).backup;
  const replicaFolder = path.join(dataDir, 'database-replicas');
  if (onObjectStore) {
    t.like(report.replicas, { objectStore: { bucket: bucketOf(dataDir), prefix: '' } });
    t.is(report.replicaFiles, 0);
  } else {
    t.deepEqual(report.replicas, { folder: replicaFolder, carried: true });
    t.true(report.replicaFiles > 0);
  }

  // Left out on request: a folder's replicas; refused with the object store, where they stay anyway.
  const lean = path.join(root, 'backups', 'lean.tar');
  const leanRun = await runBerth(['admin', 'backup', lean, '--without-master-key', '--without-replicas'], {
    BERTH_DATA_DIR: dataDir,
  });
  if (onObjectStore) {
    t.is(leanRun.code, 2);
    t.regex(leanRun.stderr, /--without-replicas is for replicas in a folder/);
  } else {
    t.is(leanRun.code, 0, leanRun.stderr);
    t.regex(leanRun.stdout, /database replicas: left out \(--without-replicas\)/);
  }

  // A replica counts as later only a whole second past the snapshot (the engine dates it in seconds).
  const snapshotAt = Date.parse(report.databaseSnapshots[site.id]!);
  await until(() => Date.now() >= snapshotAt + 2000, 'two seconds past the snapshot');
  for (const body of ['late 1', 'late 2']) await query('INSERT INTO notes (body) VALUES (?)', [body]);
  await replicated(owner, base);
  await stopServed([server]);

  const keyFile = path.join(dataDir, 'master.key');
  const restoreInto = (target: string, ...flags: string[]) =>
    runBerth(['admin', 'restore', archive, '--data-dir', target, '--master-key', keyFile, ...flags], {
      BERTH_DATA_DIR: target,
    });

  // The default: the later rows, from the replica.
  const latest = path.join(root, 'latest', 'data');
  const restored = await restoreInto(latest);
  t.is(restored.code, 0, restored.stderr);
  t.regex(restored.stdout, new RegExp(`site ${site.id} database: latest replicated at \\d{4}-`));
  t.deepEqual(notesIn(path.join(latest, 'sites', site.id, 'db.sqlite')), ['early 1', 'early 2', 'late 1', 'late 2']);
  t.deepEqual(
    (await fsp.readdir(path.join(latest, 'sites', site.id))).filter((name) => name.endsWith('.tmp')),
    [],
    'no temp file is left beside the database',
  );
  if (!onObjectStore) {
    // The carried files and those written since, from the old folder, with the times their engine dates them by.
    const carried = path.join(latest, 'database-replicas', site.id);
    const files = (await fsp.readdir(carried, { recursive: true })).filter((f) =>
      fs.statSync(path.join(carried, f)).isFile(),
    );
    t.true(files.length > 0);
    for (const file of files) {
      const original = await fsp.stat(path.join(replicaFolder, site.id, file)).catch(() => null);
      if (original) t.is((await fsp.stat(path.join(carried, file))).mtime.getTime(), original.mtime.getTime(), file);
    }
  }

  // The restored instance serves the later rows and goes on replicating.
  const second = await startServe({ BERTH_DATA_DIR: latest });
  t.teardown(() => void second.child.kill('SIGKILL'));
  const api = apiClient(second.url, owner.writeKey);
  const rows = await api.post(`v0/sites/${site.id}/databases/${db.id}/query`, {
    json: { sql: 'SELECT body FROM notes ORDER BY id' },
  });
  t.is(rows.statusCode, 200, JSON.stringify(rows.body));
  t.deepEqual(
    json<{ result: Array<{ results: Array<{ body: string }> }> }>(rows).result[0]!.results.map((r) => r.body),
    ['early 1', 'early 2', 'late 1', 'late 2'],
  );
  t.is(
    (
      await api.post(`v0/sites/${site.id}/databases/${db.id}/query`, {
        json: { sql: "INSERT INTO notes (body) VALUES ('after')" },
      })
    ).statusCode,
    200,
  );
  await replicated({ ...owner, read: apiClient(second.url, owner.readKey) }, base);
  await stopServed([second]);

  // --as-archived: the rows of the snapshot only.
  const archived = path.join(root, 'archived', 'data');
  const asArchived = await restoreInto(archived, '--as-archived', '--json');
  t.is(asArchived.code, 0, asArchived.stderr);
  t.like((JSON.parse(asArchived.stdout) as { restore: { siteDatabases: unknown[] } }).restore.siteDatabases[0], {
    siteId: site.id,
    used: 'archive',
    why: '--as-archived',
  });
  t.deepEqual(notesIn(path.join(archived, 'sites', site.id, 'db.sqlite')), ['early 1', 'early 2']);

  if (!onObjectStore) {
    // The replica folder lost with the old data dir: the carried files alone, which end with the backup.
    await fsp.rename(replicaFolder, path.join(root, 'lost-replicas'));
    const carriedOnly = path.join(root, 'carried', 'data');
    const fromCarried = await restoreInto(carriedOnly);
    t.is(fromCarried.code, 0, fromCarried.stderr);
    t.regex(
      fromCarried.stdout,
      /database: as archived \(.*\): its replica ends at .*, no later than the archive's snapshot/,
    );
    t.true((await fsp.readdir(path.join(carriedOnly, 'database-replicas', site.id))).length > 0);
    t.deepEqual(notesIn(path.join(carriedOnly, 'sites', site.id, 'db.sqlite')), ['early 1', 'early 2']);

    // A backup without them: nothing to bring the database forward from.
    const fromLean = path.join(root, 'lean', 'data');
    const leanRestore = await runBerth(['admin', 'restore', lean, '--data-dir', fromLean, '--master-key', keyFile], {
      BERTH_DATA_DIR: fromLean,
    });
    t.is(leanRestore.code, 0, leanRestore.stderr);
    t.regex(leanRestore.stdout, /database: as archived \(.*\): its replica holds nothing/);
    t.false(fs.existsSync(path.join(fromLean, 'database-replicas')));
    t.deepEqual(notesIn(path.join(fromLean, 'sites', site.id, 'db.sqlite')), ['early 1', 'early 2']);
  }
});
