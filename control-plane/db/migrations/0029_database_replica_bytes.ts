import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // The bytes a site database's replica takes, as the node replicating it last measured them: the
  // account's usage sums them, since only the node that holds a database can measure its replica
  // cheaply. A table of its own, not a column of `databases`: a node of the previous release keeps a
  // prepared `SELECT *` of that table, which PostgreSQL fails once the table gains a column.
  await knex.schema.createTable('database_replicas', (t) => {
    t.string('site_id').primary().references('sites.id');
    t.bigInteger('bytes').notNullable();
    t.string('measured_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('database_replicas');
}
