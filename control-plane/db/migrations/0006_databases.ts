import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // The binding of a site to its database. PROVISIONING until the provider has made the database, so a
  // create interrupted by a crash is resumed by the next create.
  await knex.schema.createTable('databases', (t) => {
    t.string('id').primary();
    t.string('site_id').notNullable().unique().references('sites.id');
    t.string('status').notNullable();
    t.string('created_at').notNullable();
    t.string('updated_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('databases');
}
