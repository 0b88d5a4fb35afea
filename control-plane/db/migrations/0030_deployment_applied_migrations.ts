import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // The site database migrations a deployment applied (JSON names): they commit before its switch, so
  // a deployment whose switch then failed still says the schema changed.
  await knex.schema.alterTable('deployments', (t) => {
    t.text('applied_migrations').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('deployments', (t) => {
    t.dropColumn('applied_migrations');
  });
}
