// The metadata on PostgreSQL (BERTH_DATABASE_URL): one `pg` pool, shared by Knex and the hot
// statements, so BERTH_DATABASE_POOL bounds every connection this process opens to the server.
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';

/**
 * Counts and byte sizes are bigint (int8) or numeric (a SUM) on PostgreSQL, which `pg` returns as
 * strings; Berth's never pass 2^53, so they are read as numbers, as SQLite returns them.
 */
export const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === pg.types.builtins.INT8 || oid === pg.types.builtins.NUMERIC) return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format);
  },
} as pg.CustomTypesConfig;

/** Where a URL points, without its password, for messages. */
export function describeUrl(url: string): string {
  const parsed = new URL(url);
  const socket = parsed.searchParams.get('host');
  const host = socket ? `${socket} (unix socket)` : `${parsed.hostname || 'localhost'}:${parsed.port || '5432'}`;
  return `PostgreSQL at ${host}, database ${decodeURIComponent(parsed.pathname.slice(1))}`;
}

/**
 * How long a serving process waits on the metadata server, so that a request that needs it fails with
 * metadata_unavailable within 10 s rather than hang: a connection (or a free one of the pool) within
 * 5 s; a statement, lock waits included, cancelled by the server after 8 s; and, should the server
 * itself not answer, the statement given up by the client after 9 s.
 */
export const DEADLINES = { connectMs: 5_000, statementMs: 8_000, answerMs: 9_000 } as const;

export function openPostgresPool(
  url: string,
  max: number,
  options: { onError: (err: Error) => void; deadlines: boolean },
): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    types,
    application_name: 'berth',
    connectionTimeoutMillis: options.deadlines ? DEADLINES.connectMs : 10_000,
    ...(options.deadlines ? { statement_timeout: DEADLINES.statementMs, query_timeout: DEADLINES.answerMs } : {}),
    idleTimeoutMillis: 30_000,
    keepAlive: true,
  });
  // An idle connection the server dropped: the pool replaces it; the next query reconnects.
  pool.on('error', options.onError);
  return pool;
}

/** Knex over the pool. */
export function openPostgresKnex(pool: pg.Pool): Knex {
  return knexFactory({
    client: 'pg',
    connectionPool: pool,
    log: {
      // A connection that cannot be had fails its query, which its caller reports (as
      // metadata_unavailable, once): Knex's own stack trace of it on stderr would only repeat it.
      warn: (message: string) =>
        void (message.startsWith('Acquire connection error') || console.warn(`knex: ${message}`)),
    },
  } as Knex.Config);
}

/** A connection of its own, outside the pool (the migration lock holds one for the whole migration). */
export function connectOnce(url: string): pg.Client {
  return new pg.Client({
    connectionString: url,
    types,
    application_name: 'berth',
    connectionTimeoutMillis: 10_000,
    keepAlive: true,
  });
}
