import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // Recovery restores a site database from its replica (site-databases/replication/), not from a
  // periodic copy: the copies' table goes. No release before this one read it (0020 came in the same one).
  await knex.schema.dropTableIfExists('database_copies');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.createTable('database_copies', (t) => {
    t.text('site_id').primary();
    t.text('copied_at').notNullable();
    t.bigInteger('bytes').notNullable();
  });
}
