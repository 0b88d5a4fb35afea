import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // Two-step deletion: a short-lived code bound to one database.
  await knex.schema.createTable('database_deletion_challenges', (t) => {
    t.string('code').primary();
    t.string('database_id').notNullable();
    t.string('expires_at').notNullable();
  });

  await knex.schema.createTable('database_exports', (t) => {
    t.string('id').primary();
    t.string('database_id').notNullable();
    t.string('site_id').notNullable().references('sites.id');
    t.string('status').notNullable();
    t.text('error');
    t.bigInteger('bytes');
    t.string('created_at').notNullable();
    t.string('completed_at');
    t.index(['database_id', 'created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('database_exports');
  await knex.schema.dropTableIfExists('database_deletion_challenges');
}
