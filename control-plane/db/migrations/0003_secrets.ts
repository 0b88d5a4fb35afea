import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // Values are AES-256-GCM ciphertexts under the instance's master key, bound to site and name.
  await knex.schema.createTable('secrets', (t) => {
    t.string('site_id').notNullable().references('sites.id');
    t.string('name').notNullable();
    t.text('value_ciphertext').notNullable();
    t.string('created_at').notNullable();
    t.string('updated_at').notNullable();
    t.primary(['site_id', 'name']);
  });

  await knex.schema.createTable('secret_access_logs', (t) => {
    t.increments('id');
    t.string('site_id').notNullable().references('sites.id');
    t.string('secret_name').notNullable();
    t.string('key_id').notNullable();
    t.string('via').notNullable();
    t.string('accessed_at').notNullable();
    t.index(['site_id', 'id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('secret_access_logs');
  await knex.schema.dropTableIfExists('secrets');
}
