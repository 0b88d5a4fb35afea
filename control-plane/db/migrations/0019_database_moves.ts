import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // A site database being moved from one node to another holds a lease here for the duration, so no
  // second move or recovery of it starts meanwhile; `node_id` is the node carrying it out, which
  // releases what its previous process left at its start. Nodes of the previous release go on running
  // beside this schema: it adds a table and a nullable column they do not read.
  await knex.schema.createTable('database_moves', (t) => {
    t.text('site_id').primary();
    t.text('from_node').notNullable();
    t.text('to_node').notNullable();
    t.text('node_id').notNullable();
    t.text('acquired_at').notNullable();
    t.text('expires_at').notNullable();
  });
  await knex.schema.alterTable('nodes', (t) => {
    // Set by `berth admin drain-node`: no new site database is placed on the node; cleared when it starts again.
    t.text('draining_at');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('nodes', (t) => {
    t.dropColumn('draining_at');
  });
  await knex.schema.dropTableIfExists('database_moves');
}
