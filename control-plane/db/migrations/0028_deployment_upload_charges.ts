import type { Knex } from 'knex';

/** Every account's blobs and usage counted again from what references them (see storage-quota.ts). */
async function recount(knex: Knex, withUploads: boolean): Promise<void> {
  const uploads = withUploads
    ? `UNION ALL
       SELECT sites.account_id AS account_id, deployment_uploads.sha256 AS sha256, deployment_uploads.bytes AS bytes
       FROM deployment_uploads
       JOIN deployments ON deployments.id = deployment_uploads.deployment_id
       JOIN sites ON sites.id = deployments.site_id`
    : '';
  await knex('account_blobs').delete();
  await knex.raw(`
    INSERT INTO account_blobs (account_id, blob_sha256, bytes, versions)
    SELECT account_id, sha256, MAX(bytes), COUNT(*) FROM (
      SELECT buckets.account_id AS account_id, file_versions.blob_sha256 AS sha256, file_versions.bytes AS bytes
      FROM file_versions
      JOIN files ON files.id = file_versions.file_id
      JOIN buckets ON buckets.id = files.bucket_id
      ${uploads}
    ) refs
    GROUP BY account_id, sha256`);
  await knex.raw(`
    UPDATE accounts SET storage_used_bytes = COALESCE(
      (SELECT SUM(bytes) FROM account_blobs WHERE account_blobs.account_id = accounts.id), 0)`);
}

export async function up(knex: Knex): Promise<void> {
  // A deployment's uploads are the account's storage while it is open: each counts in `account_blobs`
  // as a version does. Uploads of deployments no longer open were kept by mistake (they held their
  // bytes from the sweeper for good): they go, and the counts are made again with the open ones'.
  await knex('deployment_uploads')
    .whereIn('deployment_id', knex('deployments').whereNot({ status: 'UPLOADING' }).select('id'))
    .delete();
  await recount(knex, true);
  // Every node's periodic expiry looks for UPLOADING deployments past their day.
  await knex.schema.alterTable('deployments', (t) => {
    t.index(['status', 'created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('deployments', (t) => {
    t.dropIndex(['status', 'created_at']);
  });
  await recount(knex, false);
}
