import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // Browser-approved CLI logins: the CLI holds a poll token, a signed-in user approves the short code
  // it shows; the key is made when the CLI collects it, once. Only the poll token's SHA-256 is stored.
  await knex.schema.createTable('cli_logins', (t) => {
    t.string('id').primary();
    t.string('code').notNullable().unique();
    t.string('poll_hash').notNullable().unique();
    t.string('machine').notNullable();
    t.string('created_at').notNullable();
    t.string('expires_at').notNullable();
    t.string('approved_by');
    t.string('account_id');
    t.string('permission');
    t.string('approved_at');
    t.string('key_id');
    t.string('collected_at');
  });
  // A key collected by `berth login` is the CLI's own credential: its reads are logged as via CLI.
  await knex.schema.alterTable('api_keys', (t) => {
    t.boolean('for_cli').notNullable().defaultTo(false);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('api_keys', (t) => {
    t.dropColumn('for_cli');
  });
  await knex.schema.dropTableIfExists('cli_logins');
}
