// The metadata database's clock, for what nodes judge against each other: a heartbeat carries the time
// the database wrote it, and whether a node is down is judged by the database's time too. No node's
// clock is ever compared with another's, so a skewed clock cannot make a live node look lost. Times
// are ISO 8601 text in UTC with milliseconds, as the tables store them, so they compare as text.
import type { Knex } from 'knex';

const pg = (db: Knex) => db.client.dialect === 'postgresql';

const PG_FORMAT = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`;

/** SQL for the database's time now (its transaction's, on PostgreSQL), `offsetMs` later (or earlier, negative). */
export function timeSql(db: Knex, offsetMs = 0): Knex.Raw {
  const seconds = offsetMs / 1000;
  if (pg(db)) return db.raw(`to_char((now() + make_interval(secs => ?)) AT TIME ZONE 'UTC', ${PG_FORMAT})`, [seconds]);
  return db.raw(`strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?)`, [`${seconds >= 0 ? '+' : ''}${seconds} seconds`]);
}

/** The database's time now, in milliseconds since the epoch. */
export async function databaseNow(db: Knex): Promise<number> {
  const row = (await db.select(timeSql(db).wrap('(', ') AS now')).first()) as { now: string };
  return Date.parse(row.now);
}
