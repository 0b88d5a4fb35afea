// @ts-check
// The thread behind copySqlite (sqlite-copy.ts): one copy of a site database, off the event loop.
// Plain JavaScript: worker threads do not run through Berth's TypeScript loader.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

/** @type {{ file: string; into: string; busyMs: number }} */
const { file, into, busyMs } = workerData;

// Read-only: the database's own process and its replicator write it meanwhile, and a reader that
// closes never checkpoints its log.
const db = new Database(file, { readonly: true, fileMustExist: true, timeout: busyMs });
try {
  // VACUUM INTO reads the whole database in one transaction and writes it compact to a new file.
  db.exec(`VACUUM INTO '${into.replaceAll("'", "''")}'`);
  parentPort?.postMessage({ ok: true });
} catch (err) {
  parentPort?.postMessage({ ok: false, message: err instanceof Error ? err.message : String(err) });
} finally {
  db.close();
}
