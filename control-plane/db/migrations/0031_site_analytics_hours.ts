import type { Knex } from 'knex';
import { addMinutesToHours } from '../../analytics/store.ts';

export async function up(knex: Knex): Promise<void> {
  // Hour rows now hold their minutes from the minute's write on (analytics/store.ts), so reads of whole
  // hours need no minute rows: the minutes kept so far are added to their hours once.
  await addMinutesToHours(knex);
}

export async function down(knex: Knex): Promise<void> {
  // Before, each count was in one row only: the hours keep them, the minutes go.
  await knex('site_analytics').where({ period: 60 }).delete();
}
