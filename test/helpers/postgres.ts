// PostgreSQL for the suite. `test/run-suite.ts` starts a throwaway cluster (or takes the server named by
// BERTH_TEST_DATABASE_URL) and hands every test process its admin URL. In the PostgreSQL pass
// (BERTH_TEST_BACKEND=postgres) each data dir a test makes is one instance: it gets a database of its
// own, owned by a role that owns nothing else, and every server or admin command started on that data
// dir is given that database's URL, exactly as an operator would configure Berth.
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';

/** The role Berth connects as: it may log in and owns its databases, nothing more. */
export const BERTH_ROLE = 'berth_test';
const BERTH_PASSWORD = 'berth-test-password';
const DATABASE_PREFIX = 'berth_test_';

/** Whether this test process runs Berth on PostgreSQL. */
export const onPostgres = process.env.BERTH_TEST_BACKEND === 'postgres';

/** The admin URL of the test server, when there is one. */
export function adminUrl(): string | undefined {
  return process.env.BERTH_TEST_DATABASE_URL || undefined;
}

function requireAdminUrl(): string {
  const url = adminUrl();
  if (!url)
    throw new Error(
      'no PostgreSQL server for the tests: run the suite with `make test` (test/run-suite.ts), or set BERTH_TEST_DATABASE_URL',
    );
  return url;
}

/** Runs `work` on an admin connection to `database` (default: the admin URL's own). */
export async function asAdmin<T>(work: (client: pg.Client) => Promise<T>, database?: string): Promise<T> {
  const url = new URL(requireAdminUrl());
  if (database) url.pathname = `/${database}`;
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

const quote = (identifier: string) => `"${identifier.replaceAll('"', '""')}"`;

/** The URL Berth is given for a database: as the unprivileged role, over TCP, with its password. */
export function berthUrl(database: string): string {
  const admin = new URL(requireAdminUrl());
  // An admin URL over a unix socket (?host=/dir) reaches a server that also listens on loopback.
  const host = admin.searchParams.has('host') ? '127.0.0.1' : admin.hostname;
  return `postgres://${BERTH_ROLE}:${BERTH_PASSWORD}@${host}:${admin.port || '5432'}/${database}`;
}

/** Creates Berth's role when the server does not have it yet (idempotent). */
export async function ensureBerthRole(client: pg.Client): Promise<void> {
  const { rowCount } = await client.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [BERTH_ROLE]);
  if (rowCount === 0) {
    try {
      await client.query(
        `CREATE ROLE ${quote(BERTH_ROLE)} LOGIN PASSWORD '${BERTH_PASSWORD}' NOSUPERUSER NOCREATEDB NOCREATEROLE`,
      );
    } catch (err) {
      // Another test process created it first: "already exists", or the catalogue's unique index when both were at it at once.
      const code = (err as { code?: string }).code;
      if (code !== '42710' && code !== '23505') throw err;
    }
  }
}

/** The database of a data dir: named after its path, so a restart on the same dir finds it again. */
export function databaseOf(dataDir: string): string {
  return DATABASE_PREFIX + createHash('sha256').update(path.resolve(dataDir)).digest('hex').slice(0, 24);
}

/** Creates the data dir's database (empty, owned by Berth's role) unless it exists, and returns its URL. */
export async function databaseFor(dataDir: string): Promise<string> {
  const database = databaseOf(dataDir);
  await asAdmin(async (client) => {
    await ensureBerthRole(client);
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (rowCount !== 0) return;
    try {
      await client.query(`CREATE DATABASE ${quote(database)} OWNER ${quote(BERTH_ROLE)}`);
    } catch (err) {
      if ((err as { code?: string }).code !== '42P04') throw err;
    }
  });
  return berthUrl(database);
}

/** Drops the data dir's database, if there is one. */
export async function dropDatabaseOf(dataDir: string): Promise<void> {
  await asAdmin((client) => client.query(`DROP DATABASE IF EXISTS ${quote(databaseOf(dataDir))} WITH (FORCE)`));
}

/** Drops every database the suite made (run once, at the end). */
export async function dropTestDatabases(): Promise<void> {
  await asAdmin(async (client) => {
    const { rows } = await client.query<{ datname: string }>(
      'SELECT datname FROM pg_database WHERE starts_with(datname, $1)',
      [DATABASE_PREFIX],
    );
    for (const { datname } of rows) await client.query(`DROP DATABASE IF EXISTS ${quote(datname)} WITH (FORCE)`);
  });
}

/** The environment a server or admin command on `dataDir` needs for this pass's database: nothing on SQLite. */
export async function databaseEnv(dataDir: string): Promise<Record<string, string>> {
  return onPostgres ? { BERTH_DATABASE_URL: await databaseFor(dataDir) } : {};
}

/**
 * Everything the metadata of a data dir holds, as bytes to search: meta.sqlite and its WAL on SQLite,
 * every row of every table as text on PostgreSQL.
 */
export async function storedMetadata(dataDir: string): Promise<Buffer> {
  if (!onPostgres) {
    const read = (name: string) => fs.readFile(path.join(dataDir, name)).catch(() => Buffer.alloc(0));
    return Buffer.concat([await read('meta.sqlite'), await read('meta.sqlite-wal')]);
  }
  return asAdmin(async (client) => {
    const { rows: tables } = await client.query<{ tablename: string }>(
      "SELECT tablename FROM pg_tables WHERE schemaname = 'public'",
    );
    const parts: string[] = [];
    for (const { tablename } of tables) {
      const { rows } = await client.query<{ row: string }>(`SELECT t::text AS row FROM ${quote(tablename)} t`);
      parts.push(...rows.map((r) => r.row));
    }
    return Buffer.from(parts.join('\n'));
  }, databaseOf(dataDir));
}
