// A consistent copy of a live SQLite database with SQLite's online backup API (node-sqlite3's
// Database#backup), while other processes keep writing it: the server to meta.sqlite, a site's
// database process to its db.sqlite. Both are WAL databases, so reading never blocks their writers.
//
// The backup copies pages in steps. Each step reads inside one read transaction, but between steps
// another connection may commit, and SQLite then restarts the copy from the first page at the next
// step. Under a steady write load small steps might restart forever, so after a few restarts the rest
// is copied in one step (-1): one read transaction over the whole file, a single consistent snapshot
// that, in WAL mode, still lets writers go on (they append to the WAL; only checkpoints wait for it).
import { setTimeout as sleep } from 'node:timers/promises';
import sqlite3 from 'sqlite3';

/** node-sqlite3's Backup object; its type declarations leave it out. */
interface SqliteBackup {
  step(pages: number, callback: (err: Error | null, done?: boolean) => void): void;
  finish(callback?: (err: Error | null) => void): void;
  readonly remaining: number;
  readonly pageCount: number;
  readonly completed: boolean;
  readonly failed: boolean;
}

interface BackupCapable {
  backup(filename: string, callback: (err: Error | null) => void): SqliteBackup;
}

export interface SnapshotOptions {
  /** Pages copied per step before falling back to one step (default 1000, 4 MB at SQLite's default page size). */
  stepPages?: number;
  /** Restarts tolerated before the rest is copied in one step (default 3). */
  maxRestarts?: number;
  /** How long a busy source may keep a step waiting, in total (default 30 s). */
  busyMs?: number;
  /** Called after each step that did not finish the copy, with the pages left and the source's size. */
  onProgress?: (remaining: number, pageCount: number) => Promise<void> | void;
}

export interface SnapshotReport {
  pages: number;
  /** How many times another connection's write restarted the copy. */
  restarts: number;
  /** Whether the copy ended in a single step over the whole file. */
  wholeStep: boolean;
}

/** Thrown when the source does not exist (or is not a database); nothing is created. */
export class SnapshotSourceMissing extends Error {}

function openDatabase(file: string, mode: number): Promise<sqlite3.Database> {
  return new Promise((resolve, reject) => {
    const db: sqlite3.Database = new sqlite3.Database(file, mode, (err) => (err ? reject(err) : resolve(db)));
  });
}

const close = (db: sqlite3.Database) => new Promise<void>((resolve, reject) => db.close((err) => (err ? reject(err) : resolve())));

const isBusy = (err: unknown) => /SQLITE_BUSY|SQLITE_LOCKED|database is locked|database table is locked/.test(String((err as Error | null)?.message ?? err));

/**
 * Copies the database at `source` to a new file at `dest` (which must not exist) as it was at one
 * moment. The source is opened read-write without create, so a missing source is never made up.
 */
export async function snapshotDatabase(source: string, dest: string, options: SnapshotOptions = {}): Promise<SnapshotReport> {
  const stepPages = options.stepPages ?? 1000;
  const maxRestarts = options.maxRestarts ?? 3;
  const busyMs = options.busyMs ?? 30_000;

  let db: sqlite3.Database;
  try {
    db = await openDatabase(source, sqlite3.OPEN_READWRITE);
  } catch (err) {
    if ((err as { code?: string }).code === 'SQLITE_CANTOPEN') throw new SnapshotSourceMissing(`${source} does not exist`);
    throw err;
  }
  try {
    db.configure('busyTimeout', 10_000);
    const backup = await new Promise<SqliteBackup>((resolve, reject) => {
      const created: SqliteBackup = (db as unknown as BackupCapable).backup(dest, (err) => (err ? reject(err) : resolve(created)));
    });
    const step = (pages: number) =>
      new Promise<boolean>((resolve, reject) => backup.step(pages, (err, done) => (err ? reject(err) : resolve(done === true))));

    let restarts = 0;
    let wholeStep = false;
    let previousRemaining = Number.POSITIVE_INFINITY;
    let busySince: number | null = null;
    try {
      for (;;) {
        wholeStep = restarts >= maxRestarts;
        let done: boolean;
        try {
          done = await step(wholeStep ? -1 : stepPages);
          busySince = null;
        } catch (err) {
          // BUSY and LOCKED leave the backup usable: wait and step again, within a bound.
          if (!isBusy(err) || backup.failed) throw err;
          busySince ??= Date.now();
          if (Date.now() - busySince > busyMs) throw new Error(`${source} stayed locked for more than ${busyMs} ms`);
          await sleep(50);
          continue;
        }
        if (done) break;
        // A restart shows as a remaining count that did not go down: the copy began again.
        if (backup.remaining >= previousRemaining) restarts++;
        previousRemaining = backup.remaining;
        await options.onProgress?.(backup.remaining, backup.pageCount);
      }
      return { pages: backup.pageCount, restarts, wholeStep };
    } finally {
      await new Promise<void>((resolve) => backup.finish(() => resolve()));
    }
  } finally {
    await close(db);
  }
}

/**
 * Opens a finished snapshot (never a live database) to read or adjust it. It is switched to a rollback
 * journal first, so everything is in the one file once it is closed: no -wal to carry along. Berth
 * turns WAL back on when it opens the restored file.
 */
export async function openSnapshot(file: string): Promise<SnapshotDb> {
  const snapshot = new SnapshotDb(await openDatabase(file, sqlite3.OPEN_READWRITE));
  try {
    await snapshot.all('PRAGMA journal_mode = DELETE');
  } catch (err) {
    await snapshot.close();
    throw err;
  }
  return snapshot;
}

/** A small promise wrapper over a snapshot's connection. */
export class SnapshotDb {
  readonly #db: sqlite3.Database;

  constructor(db: sqlite3.Database) {
    this.#db = db;
  }

  all<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    return new Promise((resolve, reject) => this.#db.all<T>(sql, params, (err, rows) => (err ? reject(err) : resolve(rows))));
  }

  run(sql: string, params: unknown[] = []): Promise<void> {
    return new Promise((resolve, reject) => this.#db.run(sql, params, (err) => (err ? reject(err) : resolve())));
  }

  /** SQLite's own check of the file's structure; throws unless it is sound. */
  async check(): Promise<void> {
    const rows = await this.all<{ quick_check: string }>('PRAGMA quick_check');
    const problems = rows.map((r) => r.quick_check).filter((r) => r !== 'ok');
    if (problems.length > 0) throw new Error(`SQLite finds the copy damaged: ${problems.slice(0, 3).join('; ')}`);
  }

  close(): Promise<void> {
    return close(this.#db);
  }
}
