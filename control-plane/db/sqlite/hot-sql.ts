// The hot statements on SQLite (see ../hot-sql.ts), on better-sqlite3 directly.
//
// Reads use a connection of their own, opened read-only: it sees committed data only, never a write
// another request has in flight on Knex's connection, and in WAL mode it never waits for a writer.
// Writes borrow Knex's one connection from its pool, so they can never land inside a transaction Knex
// has open, and run as one IMMEDIATE transaction: the connection is theirs until it ends, and the
// statements run synchronously, so no other work can interleave. The commit is made durable by a
// shared fdatasync off the event loop (wal-sync.ts) before the write resolves.
import type BetterSqlite3 from 'better-sqlite3';
import type { Knex } from 'knex';
import Database from 'better-sqlite3';
import { type HotSql, type HotTx, type Param, checkColumnsNamed } from '../hot-sql.ts';
import { WalSync } from './wal-sync.ts';

/** One connection's statements, each prepared the first time its SQL text runs. */
class StatementCache implements HotTx {
  readonly #statements = new Map<string, BetterSqlite3.Statement>();

  constructor(
    readonly connection: BetterSqlite3.Database,
    /** Statements run, on every connection: each runs the statement it looks up once. */
    readonly tally: { queries: number },
  ) {}

  statement(sql: string): BetterSqlite3.Statement {
    this.tally.queries++;
    let statement = this.#statements.get(sql);
    if (!statement) {
      checkColumnsNamed(sql);
      statement = this.connection.prepare(sql);
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  async get<T>(sql: string, ...params: Param[]): Promise<T | undefined> {
    return this.statement(sql).get(...params) as T | undefined;
  }

  // The write transaction holds SQLite's one write lock: a row read in it cannot change under it.
  getForUpdate = this.get;

  async all<T>(sql: string, ...params: Param[]): Promise<T[]> {
    return this.statement(sql).all(...params) as T[];
  }

  async run(sql: string, ...params: Param[]): Promise<{ changes: number }> {
    return { changes: this.statement(sql).run(...params).changes };
  }
}

export class SqliteHotSql implements HotSql {
  readonly #knex: Knex;
  readonly #reads: StatementCache;
  /** Knex's connection, known once it has been borrowed. */
  #writes: StatementCache | undefined;
  readonly #wal: WalSync;
  readonly #tally = { queries: 0 };

  constructor(knex: Knex, filename: string) {
    this.#knex = knex;
    this.#wal = new WalSync(filename);
    const reader = new Database(filename, { readonly: true, fileMustExist: true });
    reader.pragma('busy_timeout = 10000');
    this.#reads = new StatementCache(reader, this.#tally);
  }

  /** Statements run so far, BEGIN and COMMIT included. */
  get queries(): number {
    return this.#tally.queries;
  }

  async get<T>(sql: string, ...params: Param[]): Promise<T | undefined> {
    return this.#reads.statement(sql).get(...params) as T | undefined;
  }

  async write<T>(work: (tx: HotTx) => Promise<T>): Promise<T> {
    const connection = (await this.#knex.client.acquireConnection()) as BetterSqlite3.Database;
    let result: T;
    try {
      if (this.#writes?.connection !== connection) this.#writes = new StatementCache(connection, this.#tally);
      const tx = this.#writes;
      connection.pragma('synchronous = NORMAL');
      try {
        tx.statement('BEGIN IMMEDIATE').run();
        try {
          result = await work(tx);
          tx.statement('COMMIT').run();
        } catch (err) {
          if (connection.inTransaction) tx.statement('ROLLBACK').run();
          throw err;
        }
      } finally {
        connection.pragma('synchronous = FULL');
      }
    } finally {
      await this.#knex.client.releaseConnection(connection);
    }
    await this.#wal.durable();
    return result;
  }

  async close(): Promise<void> {
    this.#wal.close();
    this.#reads.connection.close();
  }
}
