// @ts-check
// The thread behind copySqlite (sqlite-copy.ts): one consistent copy of a live site database, off the
// event loop. Plain JavaScript: worker threads do not run through Berth's TypeScript loader.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

/** @type {{ file: string; dest: string; busyMs: number }} */
const { file, dest, busyMs } = workerData;

const db = new Database(file, { fileMustExist: true, timeout: busyMs });
try {
  // One read transaction: the copy is the database as it was at one moment, and in WAL mode the
  // database's own process goes on writing meanwhile.
  db.prepare('VACUUM INTO ?').run(dest);
  parentPort?.postMessage({ ok: true });
} catch (err) {
  parentPort?.postMessage({ ok: false, message: err instanceof Error ? err.message : String(err) });
} finally {
  db.close();
}
