import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // When the latest copy of a site database in the object store was taken, and its size: what
  // `berth admin recover-database` restores from, and says the age of. Null: no copy yet. Nodes of the
  // previous release go on running beside this schema: it adds nullable columns they do not read.
  await knex.schema.alterTable('databases', (t) => {
    t.text('copied_at');
    t.bigInteger('copy_bytes');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('databases', (t) => {
    t.dropColumn('copy_bytes');
    t.dropColumn('copied_at');
  });
}
