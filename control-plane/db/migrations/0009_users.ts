import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // People: a user signs in with an email and a password and belongs to accounts as ADMIN or MEMBER.
  await knex.schema.createTable('users', (t) => {
    t.string('id').primary();
    t.string('email').notNullable().unique();
    /** scrypt$N$r$p$salt$hash; null until the user has set a password. */
    t.string('password_hash');
    t.string('created_at').notNullable();
    t.string('updated_at').notNullable();
  });
  await knex.schema.createTable('memberships', (t) => {
    t.string('account_id').notNullable().references('accounts.id');
    t.string('user_id').notNullable().references('users.id');
    t.string('role').notNullable();
    t.string('created_at').notNullable();
    t.primary(['account_id', 'user_id']);
    t.index(['user_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('memberships');
  await knex.schema.dropTableIfExists('users');
}
