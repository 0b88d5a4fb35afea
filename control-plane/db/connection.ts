// Opens the metadata database (meta.sqlite) and brings its schema up to date.
import fs from 'node:fs';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import { migrationSource } from './migrations.ts';
import { StartupError } from '../startup-error.ts';
import { VERSION } from '../version.ts';

export type Db = Knex;

/**
 * WAL lets the admin CLI write while the server reads; busy_timeout makes either side wait for the
 * other's write lock instead of failing; synchronous=FULL makes every commit durable before it returns.
 */
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

export async function openMetaDb(dataDir: string): Promise<Db> {
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const filename = path.join(dataDir, 'meta.sqlite');
  // SQLite gives its -wal and -shm files the database file's mode: make that 0600 from the start.
  fs.closeSync(fs.openSync(filename, 'a', 0o600));
  const db = knexFactory({
    client: 'sqlite3',
    connection: { filename },
    useNullAsDefault: true,
    pool: {
      min: 1,
      max: 1,
      afterCreate(conn: { exec(sql: string, cb: (err: Error | null) => void): void }, done: (err: Error | null, conn: unknown) => void) {
        conn.exec(
          'PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 10000; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;',
          (err) => done(err, conn),
        );
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
