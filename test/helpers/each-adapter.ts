// Every metadata backend this test process can reach, so that one contract test runs against each
// adapter of a port (db/metadata.ts) and its title names the one that broke it: SQLite on a temp data
// dir always, PostgreSQL when the suite's server is there (BERTH_TEST_DATABASE_URL, which
// test/run-suite.ts sets in both passes). Each open() is a fresh instance with the schema migrated,
// exactly as openMetadata leaves it for a server.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import type { Knex } from 'knex';
import { type Metadata, openMetadata } from '../../control-plane/db/metadata.ts';
import { adminUrl, databaseFor, databaseOf, dropDatabaseOf } from './postgres.ts';

export interface OpenedMetadata {
  metadata: Metadata;
  /** The same metadata opened again, as another server sharing it would; closed by close(). */
  another(): Promise<Metadata>;
  /**
   * Transactions waiting for one that holds what they need: a row lock on PostgreSQL, the one write
   * connection on SQLite. How a test knows a second writer has reached the point where it must wait.
   */
  waiting(): Promise<number>;
  /** The PostgreSQL database's name (for an admin connection to it); undefined on SQLite. */
  database: string | undefined;
  close(): Promise<void>;
}

export interface MetadataBackend {
  name: 'sqlite' | 'postgres';
  open(): Promise<OpenedMetadata>;
}

/** Connections each opened metadata may use: a holder, a waiter and a probe at once. */
const POOL = 4;

async function openInstance(
  dataDir: string,
  databaseUrl: string,
  waiting: (metadata: Metadata) => Promise<number>,
  dispose: () => Promise<void>,
): Promise<OpenedMetadata> {
  const config = { dataDir, databaseUrl, databasePool: POOL };
  const metadata = await openMetadata(config);
  const opened: Metadata[] = [metadata];
  return {
    metadata,
    async another() {
      const again = await openMetadata(config);
      opened.push(again);
      return again;
    },
    waiting: () => waiting(metadata),
    database: databaseUrl ? databaseOf(dataDir) : undefined,
    async close() {
      for (const m of opened.reverse()) await m.close();
      await dispose();
    },
  };
}

const sqlite: MetadataBackend = {
  name: 'sqlite',
  async open() {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-contract-'));
    return openInstance(
      dataDir,
      '',
      // Knex's one connection is the write lock: a second writer waits for it in the pool.
      async (metadata) =>
        (metadata.db.client as Knex.Client & { pool: { numPendingAcquires(): number } }).pool.numPendingAcquires(),
      () => fs.rm(dataDir, { recursive: true, force: true }),
    );
  },
};

const postgres: MetadataBackend = {
  name: 'postgres',
  async open() {
    // Only names the database: nothing is written in it.
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-contract-'));
    return openInstance(
      dataDir,
      await databaseFor(dataDir),
      async (metadata) => {
        const { rows } = await metadata.db.raw(
          "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
        );
        return Number(rows[0].n);
      },
      async () => {
        await dropDatabaseOf(dataDir);
        await fs.rm(dataDir, { recursive: true, force: true });
      },
    );
  },
};

let reported = false;

/**
 * The backends available here. Without a PostgreSQL server a skipped test says so, once per file,
 * instead of its contract silently running on SQLite alone.
 */
export function eachMetadataBackend(): MetadataBackend[] {
  if (adminUrl()) return [sqlite, postgres];
  if (!reported) {
    reported = true;
    test.skip('[postgres] not run: no PostgreSQL server here (BERTH_TEST_DATABASE_URL is not set)', () => {});
  }
  return [sqlite];
}
