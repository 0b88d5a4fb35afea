import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // Model calls per account and UTC day, counted before each call so failed calls count too.
  await knex.schema.createTable('llm_usage', (t) => {
    t.string('account_id').notNullable().references('accounts.id');
    t.string('day').notNullable();
    t.bigInteger('calls').notNullable();
    t.bigInteger('input_tokens').notNullable();
    t.bigInteger('output_tokens').notNullable();
    t.primary(['account_id', 'day']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('llm_usage');
}
