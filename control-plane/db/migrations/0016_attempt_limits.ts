import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // Failed attempts per key (sign-in per email and per address, CLI logins per address), counted by
  // rate-limiter-flexible's SQLite and PostgreSQL stores in the metadata, so that every server of an
  // instance counts against the same limit. The column order is the stores' own (they insert by it).
  await knex.schema.createTable('attempt_limits', (t) => {
    t.text('key').primary();
    t.integer('points').notNullable().defaultTo(0);
    // Milliseconds since the epoch at which the window ends.
    t.bigInteger('expire');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('attempt_limits');
}
