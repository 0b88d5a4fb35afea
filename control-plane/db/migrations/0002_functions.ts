import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // One row per function source path of a site. deployed_version_id is the file version being served;
  // a failed deployment of a newer version records its error and leaves the served version in place.
  await knex.schema.createTable('functions', (t) => {
    t.string('id').primary();
    t.string('site_id').notNullable().references('sites.id');
    t.text('path').notNullable();
    t.text('name').notNullable();
    t.string('status').notNullable();
    t.string('deployed_version_id');
    t.string('deployed_at');
    t.string('attempted_version_id').notNullable();
    t.text('last_error');
    t.string('created_at').notNullable();
    t.string('updated_at').notNullable();
    t.unique(['site_id', 'path']);
  });

  await knex.schema.createTable('function_logs', (t) => {
    t.increments('id');
    t.string('site_id').notNullable().references('sites.id');
    t.text('function_path');
    t.string('request_id');
    t.string('level').notNullable();
    t.text('message').notNullable();
    t.string('created_at').notNullable();
    t.index(['site_id', 'id']);
  });

  await knex.schema.alterTable('sites', (t) => {
    t.text('reconcile_report');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('sites', (t) => t.dropColumn('reconcile_report'));
  await knex.schema.dropTableIfExists('function_logs');
  await knex.schema.dropTableIfExists('functions');
}
