// Opens the metadata database (meta.sqlite) and brings its schema up to date.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';
import knexFactory, { type Knex } from 'knex';
import Database from '../../storage/sqlite-driver.js';
import { migrationSource } from './migrations.ts';
import { StartupError } from '../startup-error.ts';
import { VERSION } from '../version.ts';

export type Db = Knex;

/** Knex's better-sqlite3 client, on the driver this Node can run (storage/sqlite-driver.js). */
const KnexBetterSqlite3 = createRequire(import.meta.url)('knex/lib/dialects/better-sqlite3/index.js') as typeof Knex.Client;
class MetadataClient extends KnexBetterSqlite3 {
  // Knex's own types leave out the hook its clients load their driver with.
  _driver() {
    return Database;
  }
}

/** A data dir a newer Berth has migrated is left alone: this version cannot know what its schema means. */
async function refuseNewerSchema(db: Db, dataDir: string): Promise<void> {
  if (!(await db.schema.hasTable('knex_migrations'))) return;
  const known = new Set(await migrationSource.getMigrations([]));
  const unknown = ((await db('knex_migrations').select('name')) as Array<{ name: string }>).map((row) => row.name).filter((name) => !known.has(name));
  if (unknown.length > 0) {
    throw new StartupError(
      `the data dir ${path.resolve(dataDir)} was last used by a newer Berth (its metadata has schema step ${unknown.sort().at(-1)}, unknown to ${VERSION}): run that version or a newer one`,
    );
  }
}

export const metaDbPath = (dataDir: string): string => path.join(dataDir, 'meta.sqlite');

export async function openMetaDb(dataDir: string): Promise<Db> {
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const filename = metaDbPath(dataDir);
  // SQLite gives its -wal and -shm files the database file's mode: make that 0600 from the start.
  fs.closeSync(fs.openSync(filename, 'a', 0o600));
  // better-sqlite3 runs each statement on the calling thread: a metadata lookup costs microseconds
  // instead of a trip through libuv's threadpool, which file writes share. WAL lets the admin CLI write
  // while the server reads; busy_timeout makes either side wait for the other's write lock instead of
  // failing (the server's thread waits with it, but admin commands hold the lock for milliseconds);
  // synchronous=FULL makes every commit durable before it returns.
  const db = knexFactory({
    client: MetadataClient,
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
  try {
    await refuseNewerSchema(db, dataDir);
    await db.migrate.latest({ migrationSource, tableName: 'knex_migrations' });
  } catch (err) {
    await db.destroy();
    throw err;
  }
  return db;
}
