// The metadata port: where accounts, sites, files and everything else Berth knows are kept. On SQLite
// (meta.sqlite in the data dir, the embedded default) or on PostgreSQL (BERTH_DATABASE_URL), chosen by
// configuration here and nowhere else: services get Knex for general queries and HotSql for the
// statements every request runs, and never ask which backend is behind them.
import path from 'node:path';
import type { Knex } from 'knex';
import type pg from 'pg';
import { type RateLimiterAbstract, RateLimiterPostgres, RateLimiterSQLite } from 'rate-limiter-flexible';
import type { Config } from '../config.ts';
import { StartupError } from '../startup-error.ts';
import type { HotSql } from './hot-sql.ts';
import { type ChangeFeed, LocalChangeFeed } from './changes.ts';
import { PostgresChanges } from './postgres/changes.ts';
import { migrateToLatest } from './schema.ts';
import { connectOnce, describeUrl, openPostgresKnex, openPostgresPool, types } from './postgres/connection.ts';
import { PostgresHotSql } from './postgres/hot-sql.ts';
import { metaDbPath, openSqliteKnex } from './sqlite/connection.ts';
import { SqliteHotSql } from './sqlite/hot-sql.ts';

export type Db = Knex;

export interface Metadata {
  /**
   * Several servers may use this metadata at once (PostgreSQL): each follows the others' changes, site
   * databases are placed on nodes, and nodes may form a cluster. Unshared metadata (SQLite) belongs to
   * the one server that holds the data dir's lock.
   */
  shared: boolean;
  db: Db;
  hot: HotSql;
  /** rate-limiter-flexible's store for this metadata (its table must exist), for counts every server shares. */
  rateLimiter(options: RateLimiterOptions): RateLimiterAbstract;
  /** The feed a server publishes its changes on and learns of other servers' (see changes.ts). */
  openChanges(onError: (err: Error) => void): Promise<ChangeFeed>;
  /** Where the metadata is, for messages (never a password). */
  where: string;
  /** Statements sent to it so far, through Knex and the hot statements. */
  queries(): number;
  close(): Promise<void>;
}

/** What a rate limiter in the metadata is told; the store's client is the metadata's own. */
export type RateLimiterOptions = Omit<ConstructorParameters<typeof RateLimiterSQLite>[0], 'storeClient' | 'storeType'>;

/** Counts the statements Knex sends; the hot statements count their own. */
function countKnex(db: Db): () => number {
  let queries = 0;
  db.on('query', () => queries++);
  return () => queries;
}

type MetadataConfig = Pick<Config, 'dataDir' | 'databaseUrl' | 'databasePool'>;

/** Opens the metadata and brings its schema up to date; a problem an operator can fix is a StartupError. */
export interface OpenOptions {
  /** Told when a pooled connection fails while idle (the pool replaces it). */
  onConnectionError?: (err: Error) => void;
  /** false: refuse a database with no Berth schema instead of creating it (admin commands). */
  create?: boolean;
  /**
   * A serving process's statements have deadlines (postgres/connection.ts), so that a request never
   * waits long on a server that is gone; admin commands copying whole tables have none.
   */
  deadlines?: boolean;
}

export async function openMetadata(config: MetadataConfig, options: OpenOptions = {}): Promise<Metadata> {
  return config.databaseUrl
    ? openPostgres(config.databaseUrl, config.databasePool, options)
    : openSqlite(config.dataDir);
}

async function openSqlite(dataDir: string): Promise<Metadata> {
  const db = openSqliteKnex(dataDir);
  const where = `the data dir ${path.resolve(dataDir)}`;
  try {
    await migrateToLatest(db, where);
  } catch (err) {
    await db.destroy();
    throw err;
  }
  const hot = new SqliteHotSql(db, metaDbPath(dataDir));
  const knexQueries = countKnex(db);
  return {
    shared: false,
    db,
    hot,
    rateLimiter: (options) => new RateLimiterSQLite({ ...options, storeClient: db, storeType: 'knex' }),
    openChanges: async () => new LocalChangeFeed(),
    where,
    queries: () => knexQueries() + hot.queries,
    async close() {
      await hot.close();
      await db.destroy();
    },
  };
}

/** Codes of `pg` and of PostgreSQL that mean the server cannot be used as configured. */
function unreachable(err: unknown, where: string): StartupError | undefined {
  const code = (err as { code?: string }).code;
  const reason = (() => {
    switch (code) {
      case 'ECONNREFUSED':
        return 'the connection was refused: is the server running, and listening there?';
      case 'ENOTFOUND':
      case 'EAI_AGAIN':
        return 'the host name does not resolve';
      case 'ENOENT':
        return 'no server socket there';
      case 'ETIMEDOUT':
        return 'the server did not answer';
      case '28P01':
      case '28000':
        return 'the server refused the user or password';
      case '3D000':
        return 'the database does not exist: create it (docs/deploy.md)';
      case '42501':
        return 'the user lacks a privilege Berth needs: make it the owner of the database (docs/deploy.md)';
      default:
        return (err as Error).message === 'timeout expired' ||
          (err as Error).message === 'Connection terminated due to connection timeout'
          ? 'the server did not answer within 10 s'
          : undefined;
    }
  })();
  return reason ? new StartupError(`cannot use ${where}: ${reason} (set BERTH_DATABASE_URL)`) : undefined;
}

async function openPostgres(url: string, poolSize: number, options: OpenOptions): Promise<Metadata> {
  const where = describeUrl(url);
  // The schema is brought up to date on a connection without the serving deadlines: a migration of a
  // large table may take longer than any request should.
  const migratorPool = openPostgresPool(url, 1, { onError: () => {}, deadlines: false });
  const migrator = openPostgresKnex(migratorPool);
  try {
    await withMigrationLock(url, () => migrateToLatest(migrator, where, { create: options.create ?? true }));
  } catch (err) {
    throw unreachable(err, where) ?? err;
  } finally {
    await migrator.destroy();
    await migratorPool.end();
  }
  const pool = openPostgresPool(url, poolSize, {
    onError: options.onConnectionError ?? (() => {}),
    deadlines: options.deadlines ?? false,
  });
  const db = openPostgresKnex(pool);
  const hot = new PostgresHotSql(pool, types);
  const knexQueries = countKnex(db);
  return {
    shared: true,
    db,
    hot,
    rateLimiter: (options) => new RateLimiterPostgres({ ...options, storeClient: db, storeType: 'knex' }),
    queries: () => knexQueries() + hot.queries,
    async openChanges(onError) {
      const changes = new PostgresChanges(pool, () => connectOnce(url), onError);
      await changes.start();
      return changes;
    },
    where,
    async close() {
      await hot.close();
      await db.destroy();
      await pool.end();
    },
  };
}

/** Any 64-bit number, the same in every Berth: the advisory lock the schema is migrated under. */
const MIGRATION_LOCK = 0x6265727468n; // "berth"

/**
 * Runs `work` holding a session-level advisory lock on a connection of its own, so that nodes starting
 * together migrate one after the other: the later ones find the schema up to date.
 */
async function withMigrationLock<T>(url: string, work: () => Promise<T>): Promise<T> {
  const client: pg.Client = connectOnce(url);
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK.toString()]);
    return await work();
  } finally {
    // Ending the session releases the lock, whatever happened.
    await client.end().catch(() => {});
  }
}
