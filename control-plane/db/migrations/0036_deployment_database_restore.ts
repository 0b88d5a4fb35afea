import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // A site restored whole to an instant (deployments/whole-restore.ts) records its database's restore
  // with the deployment that put its files back: JSON {restoredTo, restoredFrom}, null for any other.
  await knex.schema.alterTable('deployments', (t) => {
    t.text('database_restore').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('deployments', (t) => {
    t.dropColumn('database_restore');
  });
}
