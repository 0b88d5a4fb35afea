// The metadata on PostgreSQL (BERTH_DATABASE_URL): one `pg` pool, shared by Knex and the hot
// statements, so BERTH_DATABASE_POOL bounds every connection this process opens to the server.
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';

/**
 * Counts and byte sizes are bigint (int8) or numeric (a SUM) on PostgreSQL, which `pg` returns as
 * strings; Berth's never pass 2^53, so they are read as numbers, as SQLite returns them.
 */
const types = {
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

export function openPostgresPool(url: string, max: number, onError: (err: Error) => void): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    types,
    application_name: 'berth',
    // A server that does not answer fails the request that needed it, never hangs it.
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
  });
  // An idle connection the server dropped: the pool replaces it; the next query reconnects.
  pool.on('error', onError);
  return pool;
}

/** Knex over the pool. */
export function openPostgresKnex(pool: pg.Pool): Knex {
  return knexFactory({ client: 'pg', connectionPool: pool } as Knex.Config);
}

/** A connection of its own, outside the pool (the migration lock holds one for the whole migration). */
export function connectOnce(url: string): pg.Client {
  return new pg.Client({ connectionString: url, types, application_name: 'berth', connectionTimeoutMillis: 10_000 });
}
