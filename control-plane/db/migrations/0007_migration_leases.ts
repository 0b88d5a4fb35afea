import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // One migration run at a time per database. A lease outlives a caller that gave up waiting; one left
  // by a process that died is released when the next server starts, and the next run checks the
  // ledger before applying anything.
  await knex.schema.createTable('migration_leases', (t) => {
    t.string('database_id').primary();
    t.string('holder').notNullable();
    t.string('acquired_at').notNullable();
    t.string('expires_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('migration_leases');
}
