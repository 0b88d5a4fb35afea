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
  const unknown = ((await db('knex_migrations').select('name')) as Array<{ name: string }>).map((row) => row.name).filter((name) => !known.has(name));
  if (unknown.length > 0) {
    throw new StartupError(
      `${where} was last used by a newer Berth (its metadata has schema step ${unknown.sort().at(-1)}, unknown to ${VERSION}): run that version or a newer one`,
    );
  }
}

export async function migrateToLatest(db: Knex, where: string): Promise<void> {
  await refuseNewerSchema(db, where);
  await db.migrate.latest({ migrationSource, tableName: 'knex_migrations' });
}
