import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // The servers (nodes) of an instance, each registered by itself at start and kept alive by its
  // heartbeat, and where each site database lives. Nodes of the previous release go on running beside
  // this schema: it only adds a table and a nullable column they do not read.
  await knex.schema.createTable('nodes', (t) => {
    t.text('id').primary();
    // Where other nodes reach this one's cluster listener (an http(s) origin); empty: no listener.
    t.text('address').notNullable();
    // Comma-separated: web, database.
    t.text('roles').notNullable();
    t.text('version').notNullable();
    t.text('started_at').notNullable();
    t.text('heartbeat_at').notNullable();
    // Set by a clean stop, so the others need not wait for the heartbeat to lapse.
    t.text('stopped_at');
  });
  await knex.schema.alterTable('databases', (t) => {
    // The node whose data dir holds the database file; null for databases made before nodes were
    // recorded, which belong to the node whose data dir holds them (it claims them at start).
    t.text('node_id');
    t.index(['node_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('databases', (t) => {
    t.dropIndex(['node_id']);
    t.dropColumn('node_id');
  });
  await knex.schema.dropTableIfExists('nodes');
}
