import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // Work in flight belongs to the server process that started it (its node: host and data dir), so
  // that a start cleans up only what its own previous process left, never another server's work.
  for (const table of ['cron_runs', 'database_exports', 'migration_leases']) {
    await knex.schema.alterTable(table, (t) => {
      t.text('node_id');
    });
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['cron_runs', 'database_exports', 'migration_leases']) {
    await knex.schema.alterTable(table, (t) => {
      t.dropColumn('node_id');
    });
  }
}
