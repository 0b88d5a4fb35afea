import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // Server-side sessions of signed-in users: the cookie holds a random token, the table its SHA-256.
  await knex.schema.createTable('sessions', (t) => {
    t.string('token_hash').primary();
    t.string('user_id').notNullable().references('users.id');
    t.string('created_at').notNullable();
    t.string('last_seen_at').notNullable();
    t.string('expires_at').notNullable();
    t.index(['user_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('sessions');
}
