import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // When a build or a package was last made or used: one no site's kept deployments hold is removed
  // once it has gone unused for a sweep's age (builds/unused-builds.ts), not while a build reuses it.
  for (const table of ['builds', 'npm_packages'])
    await knex.schema.alterTable(table, (t) => {
      t.string('used_at').nullable();
      t.index(['used_at']);
    });
  await knex.raw('UPDATE builds SET used_at = created_at');
  await knex.raw('UPDATE npm_packages SET used_at = created_at');
  // The built modules and package tarballs a published deployment's functions held, so that the
  // site's kept deployments keep them (and a rollback to one needs no registry).
  await knex.schema.createTable('deployment_builds', (t) => {
    t.string('deployment_id').notNullable().references('deployments.id');
    t.string('sha256').notNullable();
    t.bigInteger('bytes').notNullable();
    t.primary(['deployment_id', 'sha256']);
  });
  // What a site's builds hold now, each blob once: the modules its functions are served from and what
  // its kept deployments hold. Each row is one reference in `account_blobs`, so builds count against
  // the account's storage as file versions do (builds/build-charges.ts).
  await knex.schema.createTable('site_build_blobs', (t) => {
    t.string('site_id').notNullable().references('sites.id');
    t.string('sha256').notNullable();
    t.bigInteger('bytes').notNullable();
    t.primary(['site_id', 'sha256']);
    t.index(['sha256']);
  });
  // The modules functions are served from now are what the sites' builds hold to begin with.
  await knex.raw(`
    INSERT INTO site_build_blobs (site_id, sha256, bytes)
    SELECT functions.site_id, functions.module_sha256, MAX(builds.module_bytes)
    FROM functions JOIN builds ON builds.module_sha256 = functions.module_sha256
    GROUP BY functions.site_id, functions.module_sha256`);
  await knex.raw(`
    INSERT INTO account_blobs (account_id, blob_sha256, bytes, versions)
    SELECT sites.account_id, site_build_blobs.sha256, MAX(site_build_blobs.bytes), COUNT(*)
    FROM site_build_blobs JOIN sites ON sites.id = site_build_blobs.site_id
    WHERE 1 = 1
    GROUP BY sites.account_id, site_build_blobs.sha256
    ON CONFLICT (account_id, blob_sha256) DO UPDATE SET versions = account_blobs.versions + excluded.versions`);
  await knex.raw(`
    UPDATE accounts SET storage_used_bytes = COALESCE(
      (SELECT SUM(bytes) FROM account_blobs WHERE account_blobs.account_id = accounts.id), 0)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    UPDATE account_blobs SET versions = versions - (
      SELECT COUNT(*) FROM site_build_blobs JOIN sites ON sites.id = site_build_blobs.site_id
      WHERE sites.account_id = account_blobs.account_id AND site_build_blobs.sha256 = account_blobs.blob_sha256)`);
  await knex('account_blobs').where('versions', '<=', 0).delete();
  await knex.raw(`
    UPDATE accounts SET storage_used_bytes = COALESCE(
      (SELECT SUM(bytes) FROM account_blobs WHERE account_blobs.account_id = accounts.id), 0)`);
  await knex.schema.dropTable('site_build_blobs');
  await knex.schema.dropTable('deployment_builds');
  for (const table of ['builds', 'npm_packages'])
    await knex.schema.alterTable(table, (t) => {
      t.dropIndex(['used_at']);
      t.dropColumn('used_at');
    });
}
