import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // The preview hosts allowed a certificate (BERTH_TLS=acme, or a proxy's on-demand `ask`), at most
  // BERTH_TLS_PREVIEW_CERTIFICATES_PER_WEEK of them in any 7 days: every preview host is a name of its
  // own under the site host's registered domain, whose certificates the CA limits per week.
  await knex.schema.createTable('preview_certificates', (t) => {
    t.string('hostname').primary();
    t.string('granted_at').notNullable();
    t.index(['granted_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('preview_certificates');
}
