import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // What a node's heartbeat says of the replication of the site databases it holds (JSON), for
  // `berth admin nodes`: each node knows its own, and only the metadata is read by every command.
  await knex.schema.alterTable('nodes', (t) => {
    t.text('replication').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('nodes', (t) => {
    t.dropColumn('replication');
  });
}
