import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // A site's traffic, counted per node in memory and written in batches (control-plane/analytics/):
  // each row holds what some node counted in one period (`at`, epoch seconds, `period` seconds long:
  // a minute, an hour or a day). Rows add up; older minutes are folded into hours and hours into days.
  // Latencies are histograms (JSON), top paths and referrer hosts bounded lists (JSON); no client
  // address or cookie is ever stored.
  await knex.schema.createTable('site_analytics', (t) => {
    t.increments('id').primary();
    t.string('site_id').notNullable().references('sites.id');
    t.bigInteger('at').notNullable();
    t.integer('period').notNullable();
    t.bigInteger('requests').notNullable().defaultTo(0);
    t.bigInteger('status_2xx').notNullable().defaultTo(0);
    t.bigInteger('status_3xx').notNullable().defaultTo(0);
    t.bigInteger('status_4xx').notNullable().defaultTo(0);
    t.bigInteger('status_5xx').notNullable().defaultTo(0);
    t.bigInteger('bytes_out').notNullable().defaultTo(0);
    t.bigInteger('function_invocations').notNullable().defaultTo(0);
    t.bigInteger('function_errors').notNullable().defaultTo(0);
    t.bigInteger('cold_starts').notNullable().defaultTo(0);
    t.bigInteger('database_calls').notNullable().defaultTo(0);
    t.text('latency').notNullable();
    t.text('function_latency').notNullable();
    t.text('paths').notNullable();
    t.text('referrers').notNullable();
    t.index(['site_id', 'at']);
    t.index(['period', 'at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('site_analytics');
}
