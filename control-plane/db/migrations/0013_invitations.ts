import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // Keys made in the dashboard carry a name and the user who made them.
  await knex.schema.alterTable('api_keys', (t) => {
    t.string('name');
    t.string('created_by');
  });
  // An ADMIN invites an email into the account with a role; the link is single-use and only its
  // SHA-256 is stored.
  await knex.schema.createTable('invitations', (t) => {
    t.string('id').primary();
    t.string('token_hash').notNullable().unique();
    t.string('account_id').notNullable().references('accounts.id');
    t.string('email').notNullable();
    t.string('role').notNullable();
    t.string('invited_by').notNullable().references('users.id');
    t.string('created_at').notNullable();
    t.string('expires_at').notNullable();
    /** Set when accepted or revoked: a spent invitation opens nothing. */
    t.string('ended_at');
    t.index(['account_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('invitations');
  await knex.schema.alterTable('api_keys', (t) => {
    t.dropColumn('created_by');
    t.dropColumn('name');
  });
}
