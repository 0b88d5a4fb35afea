// @ts-check
// The thread behind compactSqlite (sqlite-compact.ts): one VACUUM of a site database, off the event
// loop. Plain JavaScript: worker threads do not run through Berth's TypeScript loader.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

/** @type {{ file: string; tempDir: string; busyMs: number }} */
const { file, tempDir, busyMs } = workerData;

/** @param {import('better-sqlite3').Database} db */
const size = (db) =>
  Number(db.pragma('page_count', { simple: true })) * Number(db.pragma('page_size', { simple: true }));

const db = new Database(file, { fileMustExist: true, timeout: busyMs });
try {
  const bytesBefore = size(db);
  // VACUUM builds its copy as a temporary database: in the site's folder, on the data dir's disk,
  // rather than in the server's memory or a small /tmp.
  db.pragma(`temp_store_directory = '${tempDir.replaceAll("'", "''")}'`);
  db.pragma('temp_store = FILE');
  // Set before VACUUM, this also switches a database made before incremental auto-vacuum to it.
  db.pragma('auto_vacuum = INCREMENTAL');
  db.exec('VACUUM');
  db.pragma('wal_checkpoint(TRUNCATE)');
  parentPort?.postMessage({ ok: true, value: { bytesBefore, bytesAfter: size(db) } });
} catch (err) {
  parentPort?.postMessage({ ok: false, message: err instanceof Error ? err.message : String(err) });
} finally {
  db.pragma("temp_store_directory = ''");
  db.close();
}
