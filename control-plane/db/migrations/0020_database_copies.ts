import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // The latest copy of each site database in the object store: when it was taken and its size, what
  // `berth admin recover-database` restores from and says the age of. A table of its own rather than
  // columns of `databases`: nodes of the previous release read `databases` with a prepared SELECT *,
  // which PostgreSQL refuses once the table's columns change.
  await knex.schema.createTable('database_copies', (t) => {
    t.text('site_id').primary();
    t.text('copied_at').notNullable();
    t.bigInteger('bytes').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('database_copies');
}
