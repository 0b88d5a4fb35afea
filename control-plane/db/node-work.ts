// Work in flight (an export, a cron run, a migration lease) records the node that started it, so that
// a start-up cleans up only what its own previous process left, never another live server's work. On
// SQLite only one server uses the metadata (the data-dir lock), so whatever is in flight there is its
// own past's, whichever node id recorded it (a moved data dir changes the id). Rows from before node
// ids were recorded have none, and are the past of whoever starts first.
import type { Knex } from 'knex';

/** Narrows `query` on `table` to the rows this node's previous process left. */
export function leftByThisNode(db: Knex, table: string, nodeId: string): Knex.QueryBuilder {
  const query = db(table);
  if (db.client.dialect !== 'postgresql') return query;
  return query.where((rows) => void rows.where('node_id', nodeId).orWhereNull('node_id'));
}
