import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // Who a deployment's preview host answers (PRIVATE: the account's signed-in members; PUBLIC: as the
  // live site does) and whether its functions are given the site's secrets. Instants are never public.
  await knex.schema.alterTable('deployments', (t) => {
    t.string('preview_access').notNullable().defaultTo('PRIVATE');
    t.boolean('preview_secrets').notNullable().defaultTo(false);
    // Files of the deployment whose versions were deleted for good since.
    t.integer('purged_files').notNullable().defaultTo(0);
  });
  // A history entry whose version was deleted for good: the path holds nothing in the states it made.
  await knex.schema.alterTable('deployment_files', (t) => {
    t.string('purged_at');
    t.index(['version_id']);
  });
  // A site's whole state after published deployment `seq`, kept so that rebuilding any later state reads
  // this and the entries after it, not the whole history.
  await knex.schema.createTable('history_checkpoints', (t) => {
    t.string('site_id').notNullable().references('sites.id');
    t.integer('seq').notNullable();
    t.integer('files').notNullable();
    t.primary(['site_id', 'seq']);
  });
  await knex.schema.createTable('history_checkpoint_files', (t) => {
    t.string('site_id').notNullable();
    t.integer('seq').notNullable();
    t.string('path').notNullable();
    t.string('sha256').notNullable();
    t.bigInteger('bytes').notNullable();
    t.string('content_type').notNullable();
    t.string('version_id').notNullable();
    t.primary(['site_id', 'seq', 'path']);
    t.index(['version_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('history_checkpoint_files');
  await knex.schema.dropTableIfExists('history_checkpoints');
  await knex.schema.alterTable('deployment_files', (t) => {
    t.dropIndex(['version_id']);
    t.dropColumn('purged_at');
  });
  await knex.schema.alterTable('deployments', (t) => {
    t.dropColumn('preview_access');
    t.dropColumn('preview_secrets');
    t.dropColumn('purged_files');
  });
}
