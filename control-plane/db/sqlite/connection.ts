// The metadata on SQLite, the embedded default: meta.sqlite in the data dir.
import fs from 'node:fs';
import path from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import knexFactory, { type Knex } from 'knex';

export const metaDbPath = (dataDir: string): string => path.join(dataDir, 'meta.sqlite');

/** Knex on meta.sqlite, created (mode 0600) when missing; the schema is brought up to date by the caller. */
export function openSqliteKnex(dataDir: string): Knex {
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const filename = metaDbPath(dataDir);
  // SQLite gives its -wal and -shm files the database file's mode: make that 0600 from the start.
  fs.closeSync(fs.openSync(filename, 'a', 0o600));
  // better-sqlite3 runs each statement on the calling thread: a metadata lookup costs microseconds
  // instead of a trip through libuv's threadpool, which file writes share. WAL lets the admin CLI write
  // while the server reads; busy_timeout makes either side wait for the other's write lock instead of
  // failing (the server's thread waits with it, but admin commands hold the lock for milliseconds);
  // synchronous=FULL makes every commit durable before it returns. One connection is what makes a
  // transaction's reads and writes one unit: SQLite has one writer at a time.
  return knexFactory({
    client: 'better-sqlite3',
    connection: { filename },
    useNullAsDefault: true,
    pool: {
      min: 1,
      max: 1,
      afterCreate(conn: BetterSqlite3.Database, done: (err: Error | null, conn: unknown) => void) {
        try {
          conn.pragma('journal_mode = WAL');
          conn.pragma('busy_timeout = 10000');
          conn.pragma('synchronous = FULL');
          conn.pragma('foreign_keys = ON');
          done(null, conn);
        } catch (err) {
          done(err as Error, conn);
        }
      },
    },
  });
}
