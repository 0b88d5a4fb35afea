import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('accounts', (t) => {
    t.string('id').primary();
    t.string('name').notNullable();
    t.string('plan').notNullable();
    t.string('created_at').notNullable();
    t.string('updated_at').notNullable();
  });

  await knex.schema.createTable('api_keys', (t) => {
    t.string('id').primary();
    t.string('account_id').notNullable().references('accounts.id');
    t.string('permission').notNullable();
    t.string('key_hash').notNullable().unique();
    t.string('created_at').notNullable();
    t.string('revoked_at');
    t.index(['account_id']);
  });

  await knex.schema.createTable('buckets', (t) => {
    t.string('id').primary();
    t.string('account_id').notNullable().references('accounts.id');
    t.string('name').notNullable();
    t.string('created_at').notNullable();
    t.string('updated_at').notNullable();
    t.index(['account_id', 'created_at']);
  });

  await knex.schema.createTable('sites', (t) => {
    t.string('id').primary();
    t.string('account_id').notNullable().references('accounts.id');
    t.string('bucket_id').notNullable().unique().references('buckets.id');
    t.string('name').notNullable();
    t.string('subdomain').notNullable().unique();
    t.string('access').notNullable();
    t.string('status').notNullable();
    t.string('reconcile_requested_at');
    t.string('reconciled_at');
    t.string('created_at').notNullable();
    t.string('updated_at').notNullable();
    t.index(['account_id', 'updated_at']);
  });

  // A file keeps its id for its whole life; deleting it only clears current_version_id, so its
  // history stays readable and restorable, and a later write at the same path continues it.
  await knex.schema.createTable('files', (t) => {
    t.string('id').primary();
    t.string('bucket_id').notNullable().references('buckets.id');
    t.text('path').notNullable();
    t.string('current_version_id');
    t.string('created_at').notNullable();
    t.string('updated_at').notNullable();
    t.unique(['bucket_id', 'path']);
  });

  await knex.schema.createTable('file_versions', (t) => {
    t.string('id').primary();
    t.string('file_id').notNullable().references('files.id');
    t.integer('seq').notNullable();
    t.string('blob_sha256').notNullable();
    t.bigInteger('bytes').notNullable();
    t.string('content_type').notNullable();
    t.string('restored_from_version_id');
    t.string('created_at').notNullable();
    t.unique(['file_id', 'seq']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['file_versions', 'files', 'sites', 'buckets', 'api_keys', 'accounts']) {
    await knex.schema.dropTableIfExists(table);
  }
}
