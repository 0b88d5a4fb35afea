import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // One-time links where a user sets a password: the owner's first one, and resets. Only the token's
  // SHA-256 is stored.
  await knex.schema.createTable('sign_in_links', (t) => {
    t.string('token_hash').primary();
    t.string('user_id').notNullable().references('users.id');
    t.string('created_at').notNullable();
    t.string('expires_at').notNullable();
    t.string('used_at');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('sign_in_links');
}
