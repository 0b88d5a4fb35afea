import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // A function or cron job that imports is built into one module at deploy (control-plane/builds/).
  // A build is known by its key, the digest of everything it was made from (the entry, the site's
  // modules, deno.json and deno.lock, the bundler): a rollback, a promote or a restore that brings the
  // same files back finds its modules here and needs no registry. Its module is a blob like a file's.
  await knex.schema.createTable('builds', (t) => {
    t.string('key').primary();
    t.string('entry').notNullable();
    t.string('module_sha256').notNullable();
    t.bigInteger('module_bytes').notNullable();
    t.string('created_at').notNullable();
    t.index(['module_sha256']);
  });
  // Every npm package version a build used, its tarball a blob, checked against the integrity the
  // registry's document gave: later builds, of any site and on any node, take it from here.
  await knex.schema.createTable('npm_packages', (t) => {
    t.string('name').notNullable();
    t.string('version').notNullable();
    t.string('integrity').notNullable();
    t.string('tarball_sha256').notNullable();
    t.bigInteger('tarball_bytes').notNullable();
    t.text('manifest').notNullable();
    t.string('published_at').nullable();
    t.string('created_at').notNullable();
    t.primary(['name', 'version']);
    t.index(['tarball_sha256']);
  });
  // The built module a function serves; null for a v0 function, whose source is its module.
  await knex.schema.alterTable('functions', (t) => {
    t.string('module_sha256').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('functions', (t) => {
    t.dropColumn('module_sha256');
  });
  await knex.schema.dropTable('npm_packages');
  await knex.schema.dropTable('builds');
}
