// A consistent copy of a live SQLite database with SQLite's online backup API (better-sqlite3's
// Database#backup), while other processes keep writing it: the server to meta.sqlite, a site's
// database process to its db.sqlite. Both are WAL databases, so reading never blocks their writers.
//
// The backup copies pages in steps. Each step reads inside one read transaction, but between steps
// another connection may commit, and SQLite then restarts the copy from the first page at the next
// step. Under a steady write load small steps might restart forever, so after a few restarts the rest
// is copied in one step: one read transaction over the whole file, a single consistent snapshot
// that, in WAL mode, still lets writers go on (they append to the WAL; only checkpoints wait for it).
//
// better-sqlite3 runs each step on the main thread and steps again after SQLITE_BUSY as if the step
// had worked. The source's busy timeout is therefore the bound itself: a step that comes back without
// progress after waiting that long found the source locked all along.
import fs from 'node:fs';
import type BetterSqlite3 from 'better-sqlite3';
import Database from 'better-sqlite3';

export interface SnapshotOptions {
  /** Pages copied per step before falling back to one step (default 1000, 4 MB at SQLite's default page size). */
  stepPages?: number;
  /** Restarts tolerated before the rest is copied in one step (default 3). */
  maxRestarts?: number;
  /** How long a busy source may keep the copy waiting without progress (default 30 s). */
  busyMs?: number;
  /** Called after each step that did not finish the copy, with the pages left and the source's size. */
  onProgress?: (remaining: number, pageCount: number) => void;
}

export interface SnapshotReport {
  pages: number;
  /** How many times another connection's write restarted the copy. */
  restarts: number;
  /** Whether the copy ended in a single step over the whole file. */
  wholeStep: boolean;
}

/** Thrown when the source does not exist; nothing is created. */
export class SnapshotSourceMissing extends Error {}

/** A step over everything left: SQLite copies at most the pages there are (better-sqlite3 takes no -1). */
const WHOLE_STEP = 0x7fffffff;

/**
 * Copies the database at `source` to a new file at `dest` (which must not exist) as it was at one
 * moment. The source is opened read-write without create, so a missing source is never made up.
 */
export async function snapshotDatabase(
  source: string,
  dest: string,
  options: SnapshotOptions = {},
): Promise<SnapshotReport> {
  const stepPages = options.stepPages ?? 1000;
  const maxRestarts = options.maxRestarts ?? 3;
  const busyMs = options.busyMs ?? 30_000;
  const locked = () => new Error(`${source} stayed locked for more than ${busyMs} ms`);

  let db: BetterSqlite3.Database;
  try {
    db = new Database(source, { fileMustExist: true, timeout: busyMs });
  } catch (err) {
    // A missing folder is a TypeError of better-sqlite3's, a missing file SQLITE_CANTOPEN.
    if (!fs.existsSync(source)) throw new SnapshotSourceMissing(`${source} does not exist`);
    throw err;
  }
  try {
    let restarts = 0;
    let previousRemaining = Number.POSITIVE_INFINITY;
    let stalledSince: number | null = null;
    let stepStarted = performance.now();
    const { totalPages } = await db.backup(dest, {
      // Called between steps (the first copies no page); the next step copies as many pages as it returns.
      progress: ({ totalPages: pageCount, remainingPages }) => {
        if (remainingPages < previousRemaining) {
          stalledSince = null;
        } else {
          // A remaining count that did not go down: the copy began again, or the source stayed busy.
          stalledSince ??= stepStarted;
          if (performance.now() - stalledSince >= busyMs) throw locked();
          restarts++;
        }
        previousRemaining = remainingPages;
        options.onProgress?.(remainingPages, pageCount);
        stepStarted = performance.now();
        return restarts >= maxRestarts ? WHOLE_STEP : stepPages;
      },
    });
    // Busy in the first step, SQLite has counted no page yet: better-sqlite3 takes that for the end
    // of the copy, and removes the file it had just created.
    if (!fs.existsSync(dest)) throw locked();
    return { pages: totalPages, restarts, wholeStep: restarts >= maxRestarts };
  } finally {
    db.close();
  }
}

/**
 * Opens a finished snapshot (never a live database) to read or adjust it. It is switched to a rollback
 * journal first, so everything is in the one file once it is closed: no -wal to carry along. Berth
 * turns WAL back on when it opens the restored file.
 */
export function openSnapshot(file: string): SnapshotDb {
  const db = new Database(file, { fileMustExist: true });
  try {
    db.pragma('journal_mode = DELETE');
  } catch (err) {
    db.close();
    throw err;
  }
  return new SnapshotDb(db);
}

/** A snapshot's connection, with the few statements the backup runs on it. */
export class SnapshotDb {
  readonly #db: BetterSqlite3.Database;

  constructor(db: BetterSqlite3.Database) {
    this.#db = db;
  }

  all<T>(sql: string, params: unknown[] = []): T[] {
    return this.#db.prepare<unknown[], T>(sql).all(...params);
  }

  run(sql: string, params: unknown[] = []): void {
    this.#db.prepare(sql).run(...params);
  }

  /** SQLite's own check of the file's structure; throws unless it is sound. */
  check(): void {
    const problems = this.all<{ quick_check: string }>('PRAGMA quick_check')
      .map((r) => r.quick_check)
      .filter((r) => r !== 'ok');
    if (problems.length > 0) throw new Error(`SQLite finds the copy damaged: ${problems.slice(0, 3).join('; ')}`);
  }

  close(): void {
    this.#db.close();
  }
}
