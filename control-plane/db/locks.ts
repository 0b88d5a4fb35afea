// Row locks for Knex transactions that read rows to decide a change (is there an export running, is
// this the last ADMIN, how many sites has the account). On PostgreSQL, at READ COMMITTED, two such
// transactions would each decide on what the other has not committed yet: locking the row both start
// from (FOR UPDATE) makes the second wait for the first and then read what it wrote. On SQLite a
// transaction runs alone on the metadata's one connection, so there is nothing to lock (and SQLite
// has no FOR UPDATE). The same for a table whose writers must take turns.
import type { Knex } from 'knex';

/** Locks the rows of `table` matching `where` until the transaction ends; returns whether there were any. */
export async function lockRows(trx: Knex.Transaction, table: string, where: Record<string, string>): Promise<boolean> {
  const rows = (await forUpdate(trx, trx(table).where(where).select(trx.raw('1 AS locked')))) as unknown[];
  return rows.length > 0;
}

/** `query`, whose rows stay locked until the transaction ends (FOR UPDATE on PostgreSQL). */
export function forUpdate<Q extends Knex.QueryBuilder>(trx: Knex.Transaction, query: Q): Q {
  return trx.client.dialect === 'postgresql' ? (query.forUpdate() as Q) : query;
}

/**
 * Makes transactions that pass the same `name` take turns, for a decision that no existing row stands
 * for (is there an owner yet?): a transaction-scoped advisory lock on PostgreSQL; nothing on SQLite.
 */
export async function lockName(trx: Knex.Transaction, name: string): Promise<void> {
  if (trx.client.dialect === 'postgresql')
    await trx.raw('SELECT pg_advisory_xact_lock(hashtext(?))', [`berth:${name}`]);
}

/**
 * Makes the transactions writing `table` take turns, each until it ends, so the ids they take commit in
 * order: an exclusive table lock on PostgreSQL (readers go on); nothing on SQLite, whose one writer
 * already does.
 */
export async function lockTableForWriters(trx: Knex.Transaction, table: string): Promise<void> {
  if (trx.client.dialect === 'postgresql') await trx.raw('LOCK TABLE ?? IN EXCLUSIVE MODE', [table]);
}
