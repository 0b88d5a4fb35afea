import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('functions', (t) => {
    t.string('kind').notNullable().defaultTo('api');
    t.text('schedule');
    // The newest scheduled time a run was started for; written before the run starts, so a restart
    // never runs the same scheduled time twice.
    t.string('cron_last_scheduled_at');
  });

  await knex.schema.createTable('cron_runs', (t) => {
    t.string('id').primary();
    t.string('site_id').notNullable().references('sites.id');
    t.string('function_id').notNullable();
    t.text('path').notNullable();
    t.string('scheduled_at').notNullable();
    t.string('started_at');
    t.string('ended_at');
    t.string('outcome').notNullable();
    t.text('error');
    t.index(['site_id', 'scheduled_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('cron_runs');
  await knex.schema.alterTable('functions', (t) => {
    t.dropColumn('cron_last_scheduled_at');
    t.dropColumn('schedule');
    t.dropColumn('kind');
  });
}
