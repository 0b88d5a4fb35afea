// Brings the metadata schema up to date with Knex's migrator, on either backend: one set of migrations
// (migrations.ts), each run in a transaction. Metadata a newer Berth migrated is left alone: this version
// cannot know what its schema means.
import type { Knex } from 'knex';
import { StartupError } from '../startup-error.ts';
import { VERSION } from '../version.ts';
import { migrationSource } from './migrations.ts';

async function refuseNewerSchema(db: Knex, where: string): Promise<void> {
  if (!(await db.schema.hasTable('knex_migrations'))) return;
  const known = new Set(await migrationSource.getMigrations([]));
  const unknown = ((await db('knex_migrations').select('name')) as Array<{ name: string }>)
    .map((row) => row.name)
    .filter((name) => !known.has(name));
  if (unknown.length > 0) {
    throw new StartupError(
      `${where} was last used by a newer Berth (its metadata has schema step ${unknown.sort().at(-1)}, unknown to ${VERSION}): run that version or a newer one`,
    );
  }
}

/**
 * Migrates the schema to this version's. `create: false` (an admin command not told to start a new
 * instance) refuses metadata that has no schema yet: it is a wrong address, not a new instance.
 */
export async function migrateToLatest(db: Knex, where: string, options: { create?: boolean } = {}): Promise<void> {
  if (options.create === false && !(await db.schema.hasTable('knex_migrations'))) {
    throw new StartupError(
      `${where} holds no Berth metadata: point BERTH_DATABASE_URL at the server's database, or add --create-data-dir to start a new instance there`,
    );
  }
  await refuseNewerSchema(db, where);
  await db.migrate.latest({ migrationSource, tableName: 'knex_migrations' });
}
