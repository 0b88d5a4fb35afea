// The metadata statements every request runs (who holds this key, is this bucket theirs) and the
// commit of a file write, on better-sqlite3 directly: each SQL text is prepared once and then runs in
// a few microseconds, where Knex's query builder and runner spend close to a hundred on every call.
// Everything else reads and writes through Knex.
//
// Reads use a connection of their own, opened read-only: it sees committed data only, never a write
// another request has in flight on Knex's connection, and in WAL mode it never waits for a writer.
// Writes borrow Knex's one connection from its pool, so they can never land inside a transaction
// Knex has open, and run as one synchronous IMMEDIATE transaction: no other work can interleave. Their
// commit is made durable by a shared fdatasync off the event loop (wal-sync.ts) before they resolve.
import type BetterSqlite3 from 'better-sqlite3';
import Database from '../../storage/sqlite-driver.js';
import type { Db } from './connection.ts';
import { WalSync } from './wal-sync.ts';

type Param = string | number | bigint | null | Buffer;

/** What a write transaction may do on the writer's connection. */
export interface HotWriter {
  get<T>(sql: string, ...params: Param[]): T | undefined;
  all<T>(sql: string, ...params: Param[]): T[];
  run(sql: string, ...params: Param[]): BetterSqlite3.RunResult;
}

/** One connection's statements, each prepared the first time its SQL text runs. */
class StatementCache implements HotWriter {
  readonly #statements = new Map<string, BetterSqlite3.Statement>();

  constructor(readonly connection: BetterSqlite3.Database) {}

  #statement(sql: string): BetterSqlite3.Statement {
    let statement = this.#statements.get(sql);
    if (!statement) {
      statement = this.connection.prepare(sql);
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  get<T>(sql: string, ...params: Param[]): T | undefined {
    return this.#statement(sql).get(...params) as T | undefined;
  }

  all<T>(sql: string, ...params: Param[]): T[] {
    return this.#statement(sql).all(...params) as T[];
  }

  run(sql: string, ...params: Param[]): BetterSqlite3.RunResult {
    return this.#statement(sql).run(...params);
  }
}

export class HotStatements {
  readonly #knex: Db;
  readonly #reads: StatementCache;
  /** Knex's connection, known once it has been borrowed. */
  #writes: StatementCache | undefined;
  readonly #wal: WalSync;

  constructor(knex: Db, filename: string) {
    this.#knex = knex;
    this.#wal = new WalSync(filename);
    const reader = new Database(filename, { readonly: true, fileMustExist: true });
    reader.pragma('busy_timeout = 10000');
    this.#reads = new StatementCache(reader);
  }

  /** The first row of a read, from committed data. */
  get<T>(sql: string, ...params: Param[]): T | undefined {
    return this.#reads.get<T>(sql, ...params);
  }

  /**
   * Runs `work` as one IMMEDIATE transaction on Knex's connection, waiting for it like any Knex query,
   * and resolves once the commit is on disk.
   */
  async write<T>(work: (writer: HotWriter) => T): Promise<T> {
    const connection = (await this.#knex.client.acquireConnection()) as BetterSqlite3.Database;
    let result: T;
    try {
      if (this.#writes?.connection !== connection) this.#writes = new StatementCache(connection);
      const writer = this.#writes;
      connection.pragma('synchronous = NORMAL');
      try {
        result = connection.transaction(() => work(writer)).immediate();
      } finally {
        connection.pragma('synchronous = FULL');
      }
    } finally {
      await this.#knex.client.releaseConnection(connection);
    }
    await this.#wal.durable();
    return result;
  }

  close(): void {
    this.#wal.close();
    this.#reads.connection.close();
  }
}
