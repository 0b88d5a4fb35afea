import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // What an account stores is counted once per blob its file versions reference, however many
  // versions (or files) share it: `account_blobs` holds how many of the account's versions reference
  // each blob, and `storage_used_bytes` the sum of their sizes, both kept in the transaction that adds
  // or removes a version, so a quota check is one row read. `storage_limit_bytes` is the operator's
  // override of the plan default (null: the default).
  await knex.schema.alterTable('accounts', (t) => {
    t.bigInteger('storage_used_bytes').notNullable().defaultTo(0);
    t.bigInteger('storage_limit_bytes');
  });
  await knex.schema.createTable('account_blobs', (t) => {
    t.string('account_id').notNullable().references('accounts.id');
    t.string('blob_sha256').notNullable();
    t.bigInteger('bytes').notNullable();
    t.integer('versions').notNullable();
    t.primary(['account_id', 'blob_sha256']);
  });
  // The blob sweeper asks whether any version still references a blob.
  await knex.schema.alterTable('file_versions', (t) => {
    t.index(['blob_sha256']);
  });

  await knex.raw(`
    INSERT INTO account_blobs (account_id, blob_sha256, bytes, versions)
    SELECT buckets.account_id, file_versions.blob_sha256, MAX(file_versions.bytes), COUNT(*)
    FROM file_versions
    JOIN files ON files.id = file_versions.file_id
    JOIN buckets ON buckets.id = files.bucket_id
    GROUP BY buckets.account_id, file_versions.blob_sha256`);
  await knex.raw(`
    UPDATE accounts SET storage_used_bytes = COALESCE(
      (SELECT SUM(bytes) FROM account_blobs WHERE account_blobs.account_id = accounts.id), 0)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('file_versions', (t) => {
    t.dropIndex(['blob_sha256']);
  });
  await knex.schema.dropTableIfExists('account_blobs');
  await knex.schema.alterTable('accounts', (t) => {
    t.dropColumn('storage_limit_bytes');
    t.dropColumn('storage_used_bytes');
  });
}
