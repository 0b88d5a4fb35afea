import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // A site's own hostnames. Several sites may claim a name while it is PENDING (a claim proves nothing
  // until its TXT record is seen); at most one holds it ACTIVE, which the partial unique index keeps
  // true whatever verifications race. `checked_at` is when an ACTIVE domain's record was last looked
  // for, `failing_since` when it was first found missing: after a grace period the domain goes back to
  // PENDING and stops being served.
  await knex.schema.createTable('site_domains', (t) => {
    t.string('site_id').notNullable().references('sites.id');
    t.string('hostname').notNullable();
    t.string('status').notNullable();
    t.string('verification_value').notNullable();
    t.boolean('canonical').notNullable().defaultTo(false);
    t.boolean('redirect_subdomain').notNullable().defaultTo(false);
    t.string('created_at').notNullable();
    t.string('verified_at');
    t.string('checked_at');
    t.string('failing_since');
    t.primary(['site_id', 'hostname']);
    t.index(['hostname']);
    t.index(['status', 'checked_at']);
  });
  await knex.raw(`CREATE UNIQUE INDEX site_domains_active ON site_domains (hostname) WHERE status = 'ACTIVE'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('site_domains');
}
