import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // PRIVATE sites: the control plane hands a signed-in user a single-use token bound to one site, which
  // that site's host exchanges for a session of its own. Only SHA-256 digests of tokens are stored.
  await knex.schema.createTable('site_tokens', (t) => {
    t.string('token_hash').primary();
    t.string('site_id').notNullable().references('sites.id');
    t.string('user_id').notNullable().references('users.id');
    t.string('expires_at').notNullable();
    t.string('used_at');
  });
  await knex.schema.createTable('site_sessions', (t) => {
    t.string('token_hash').primary();
    t.string('site_id').notNullable().references('sites.id');
    t.string('user_id').notNullable().references('users.id');
    t.string('created_at').notNullable();
    t.string('expires_at').notNullable();
    t.index(['user_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('site_sessions');
  await knex.schema.dropTableIfExists('site_tokens');
}
