import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // Certificates Berth got for the names it serves (BERTH_TLS=acme), in the metadata so every node of an
  // instance serves them: the PEM chain as issued, its key sealed with the master key. `renew_at` is
  // when the renewal job orders the next one.
  await knex.schema.createTable('tls_certificates', (t) => {
    t.string('hostname').primary();
    t.text('certificate').notNullable();
    t.text('key_sealed').notNullable();
    t.string('not_before').notNullable();
    t.string('not_after').notNullable();
    t.string('renew_at').notNullable();
    t.string('issued_at').notNullable();
    t.index(['renew_at']);
  });
  // One row per name that was ever ordered: the lease of the node ordering it now (`node_id` until
  // `lease_expires_at`), so one node orders a name at a time, and the name's back-off after failures
  // (`retry_at`, growing with `failures`, the last one's `last_error`).
  await knex.schema.createTable('tls_orders', (t) => {
    t.string('hostname').primary();
    t.string('node_id');
    t.string('lease_expires_at');
    t.integer('failures').notNullable().defaultTo(0);
    t.string('failed_at');
    t.string('retry_at');
    t.text('last_error');
  });
  // HTTP-01 challenges in flight, answered on port 80 by whichever node the CA reaches.
  await knex.schema.createTable('tls_challenges', (t) => {
    t.string('token').primary();
    t.text('key_authorization').notNullable();
    t.string('hostname').notNullable();
    t.string('created_at').notNullable();
  });
  // The instance's ACME account at each directory: its key sealed with the master key.
  await knex.schema.createTable('tls_accounts', (t) => {
    t.string('directory_url').primary();
    t.text('key_sealed').notNullable();
    t.string('created_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['tls_accounts', 'tls_challenges', 'tls_orders', 'tls_certificates'])
    await knex.schema.dropTableIfExists(table);
}
