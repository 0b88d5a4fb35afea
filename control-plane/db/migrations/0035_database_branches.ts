import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // The branches of site databases that previews run on (database-branches/): one per deployment
  // being previewed or instant shown, made on its first database call by one maker at a time (the row
  // is the claim), on the node that holds the site's database, and dropped when its preview ends.
  await knex.schema.createTable('database_branches', (t) => {
    t.string('site_id').notNullable().references('sites.id');
    t.string('branch').notNullable();
    t.string('deployment_id').nullable();
    t.string('status').notNullable();
    t.string('node_id').nullable();
    t.string('made_from').nullable();
    t.string('as_of').nullable();
    t.bigInteger('bytes').notNullable().defaultTo(0);
    t.text('error').nullable();
    t.string('maker').notNullable();
    t.string('claimed_at').notNullable();
    t.string('created_at').notNullable();
    t.string('used_at').notNullable();
    t.primary(['site_id', 'branch']);
    t.index(['deployment_id']);
    t.index(['used_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('database_branches');
}
