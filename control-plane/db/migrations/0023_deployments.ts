import crypto from 'node:crypto';
import type { Knex } from 'knex';

const BATCH = 500;

export async function up(knex: Knex): Promise<void> {
  // A site's history: every change to its files is a deployment, many files published at once or one
  // written through the file API. `seq` orders a site's published deployments (taken under the site's
  // row lock); `short_id` names a deployment's preview host, `<short_id>--<subdomain>`.
  await knex.schema.createTable('deployments', (t) => {
    t.string('id').primary();
    t.string('site_id').notNullable().references('sites.id');
    t.string('short_id').notNullable();
    t.string('kind').notNullable();
    t.string('status').notNullable();
    t.boolean('prune').notNullable().defaultTo(false);
    t.text('message');
    t.string('author').notNullable();
    t.string('created_at').notNullable();
    t.string('published_at');
    t.integer('seq');
    t.string('source_deployment_id');
    t.string('restored_at');
    t.integer('file_count').notNullable().defaultTo(0);
    t.bigInteger('bytes').notNullable().defaultTo(0);
    t.text('errors');
    // The site database migrations it carries (JSON [{name, sql}]), applied before its switch.
    t.text('migrations');
    t.unique(['site_id', 'short_id']);
    t.unique(['site_id', 'seq']);
    t.index(['site_id', 'created_at']);
  });
  // What a deployment holds (UPLOADING: the set asked for) or did (PUBLISHED: for each path it changed,
  // the version it made current, or a removal: sha256 null). `uploaded` marks bytes sent for it.
  await knex.schema.createTable('deployment_files', (t) => {
    t.string('deployment_id').notNullable().references('deployments.id');
    t.string('path').notNullable();
    t.string('sha256');
    t.bigInteger('bytes').notNullable().defaultTo(0);
    t.string('content_type');
    t.string('version_id');
    t.primary(['deployment_id', 'path']);
    t.index(['sha256']);
  });
  // Bytes sent for an UPLOADING deployment: with the account's own blobs, what its publish may use.
  // They keep the blobs from the sweeper until the deployment is published or expires.
  await knex.schema.createTable('deployment_uploads', (t) => {
    t.string('deployment_id').notNullable().references('deployments.id');
    t.string('sha256').notNullable();
    t.bigInteger('bytes').notNullable();
    t.primary(['deployment_id', 'sha256']);
    t.index(['sha256']);
  });
  // Counted up by every publish, in its transaction: a node that reads a file row of a newer
  // generation than it cached from forgets the bucket's cached files before answering.
  await knex.schema.createTable('bucket_generations', (t) => {
    t.string('bucket_id').primary();
    t.bigInteger('generation').notNullable();
  });
  // Each site's history starts with what its files are now: a BASELINE deployment of its current files.
  const now = new Date().toISOString();
  const sites = (await knex('sites').select('id', 'bucket_id')) as Array<{ id: string; bucket_id: string }>;
  for (const site of sites) {
    await knex('bucket_generations').insert({ bucket_id: site.bucket_id, generation: 0 });
    const files = (await knex('files')
      .join('file_versions', 'file_versions.id', 'files.current_version_id')
      .where('files.bucket_id', site.bucket_id)
      .andWhereRaw("substr(files.path, 1, 5) <> 'data/'")
      .select(
        'files.path as path',
        'file_versions.id as version_id',
        'file_versions.blob_sha256 as sha256',
        'file_versions.bytes as bytes',
        'file_versions.content_type as content_type',
      )) as Array<{ path: string; version_id: string; sha256: string; bytes: number; content_type: string }>;
    if (files.length === 0) continue;
    const id = crypto.randomUUID();
    await knex('deployments').insert({
      id,
      site_id: site.id,
      short_id: crypto.randomBytes(5).toString('hex').slice(0, 8),
      kind: 'BASELINE',
      status: 'PUBLISHED',
      prune: false,
      message: 'the files the site had when its history began',
      author: 'system',
      created_at: now,
      published_at: now,
      seq: 1,
      file_count: files.length,
      bytes: files.reduce((sum, f) => sum + Number(f.bytes), 0),
    });
    for (let i = 0; i < files.length; i += BATCH) {
      await knex('deployment_files').insert(files.slice(i, i + BATCH).map((f) => ({ deployment_id: id, ...f })));
    }
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['bucket_generations', 'deployment_uploads', 'deployment_files', 'deployments'])
    await knex.schema.dropTableIfExists(table);
}
