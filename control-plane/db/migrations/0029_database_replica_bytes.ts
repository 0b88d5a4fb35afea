import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // The bytes a database's replica takes, as the node replicating it last measured them: the account's
  // usage sums them, since only the node that holds a database can measure its replica cheaply.
  await knex.schema.alterTable('databases', (t) => {
    t.bigInteger('replica_bytes').notNullable().defaultTo(0);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('databases', (t) => {
    t.dropColumn('replica_bytes');
  });
}
