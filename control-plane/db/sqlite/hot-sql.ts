// The hot statements on SQLite (see ../hot-sql.ts), on better-sqlite3 directly.
//
// Reads use a connection of their own, opened read-only: it sees committed data only, never a write
// another request has in flight on Knex's connection, and in WAL mode it never waits for a writer.
// Writes borrow Knex's one connection from its pool, so they can never land inside a transaction Knex
// has open, and run as one IMMEDIATE transaction: the connection is theirs until it ends, and the
// statements run synchronously, so no other work can interleave. A batch runs its statements one
// after the other at once; the statements left for the commit run just before it. The commit is made
// durable by a shared fdatasync off the event loop (wal-sync.ts) before the write resolves.
import type BetterSqlite3 from 'better-sqlite3';
import type { Knex } from 'knex';
import Database from 'better-sqlite3';
import {
  type HotSql,
  type HotTx,
  type Param,
  type Statement,
  type StatementResult,
  checkColumnsNamed,
} from '../hot-sql.ts';
import { WalSync } from './wal-sync.ts';

/** What the adapter has run: statements (BEGIN and COMMIT included), and the calls that waited on them. */
interface Tally {
  queries: number;
  roundTrips: number;
}

const NOTHING: StatementResult = Object.freeze({ rows: [], changes: 0 }) as StatementResult;

/** One connection's statements, each prepared the first time its SQL text runs. */
class StatementCache {
  readonly #statements = new Map<string, BetterSqlite3.Statement>();

  constructor(
    readonly connection: BetterSqlite3.Database,
    /** Statements run, on every connection: each runs the statement it looks up once. */
    readonly tally: Tally,
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

  /** Runs a statement of a batch or the commit: a statement that returns rows changed as many as it returned. */
  result(s: Statement): StatementResult {
    const statement = this.statement(s.sql);
    if (statement.reader) {
      const rows = statement.all(...s.params);
      return { rows, changes: rows.length };
    }
    return { rows: [], changes: statement.run(...s.params).changes };
  }
}

class SqliteTx implements HotTx {
  /** Whether the work has run a statement: then the commit or the rollback is a call of its own. */
  sent = false;
  /** The commit has begun: a failure there is rolled back in the same call, as PostgreSQL's COMMIT does. */
  committing = false;
  readonly #atCommit: Statement[] = [];
  readonly #afterCommit: Array<() => void> = [];

  constructor(readonly cache: StatementCache) {}

  #waited(): void {
    this.sent = true;
    this.cache.tally.roundTrips++;
  }

  async get<T>(sql: string, ...params: Param[]): Promise<T | undefined> {
    this.#waited();
    return this.cache.statement(sql).get(...params) as T | undefined;
  }

  // The write transaction holds SQLite's one write lock: a row read in it cannot change under it.
  getForUpdate = this.get;

  async all<T>(sql: string, ...params: Param[]): Promise<T[]> {
    this.#waited();
    return this.cache.statement(sql).all(...params) as T[];
  }

  async run(sql: string, ...params: Param[]): Promise<{ changes: number }> {
    this.#waited();
    return { changes: this.cache.statement(sql).run(...params).changes };
  }

  async batch<K extends string>(statements: Record<K, Statement | undefined>): Promise<Record<K, StatementResult>> {
    const names = Object.keys(statements) as K[];
    if (names.some((name) => statements[name] !== undefined)) this.#waited();
    const answers = {} as Record<K, StatementResult>;
    for (const name of names) {
      const s = statements[name];
      answers[name] = s ? this.cache.result(s) : NOTHING;
    }
    return answers;
  }

  commitWith(...statements: Statement[]): void {
    this.#atCommit.push(...statements);
  }

  afterCommit(then: () => void): void {
    this.#afterCommit.push(then);
  }

  /** Runs what was left for the commit; the commit that follows is one call with it. */
  finish(): void {
    if (this.sent || this.#atCommit.length > 0) this.#waited();
    this.committing = true;
    for (const s of this.#atCommit) this.cache.result(s);
  }

  committed(): void {
    for (const then of this.#afterCommit) then();
  }
}

export class SqliteHotSql implements HotSql {
  readonly #knex: Knex;
  readonly #reads: StatementCache;
  /** Knex's connection, known once it has been borrowed. */
  #writes: StatementCache | undefined;
  readonly #wal: WalSync;
  readonly #tally: Tally = { queries: 0, roundTrips: 0 };

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

  get roundTrips(): number {
    return this.#tally.roundTrips;
  }

  async get<T>(sql: string, ...params: Param[]): Promise<T | undefined> {
    this.#tally.roundTrips++;
    return this.#reads.statement(sql).get(...params) as T | undefined;
  }

  async write<T>(work: (tx: HotTx) => Promise<T>): Promise<T> {
    const connection = (await this.#knex.client.acquireConnection()) as BetterSqlite3.Database;
    let result: T;
    let tx: SqliteTx;
    try {
      if (this.#writes?.connection !== connection) this.#writes = new StatementCache(connection, this.#tally);
      const cache = this.#writes;
      tx = new SqliteTx(cache);
      connection.pragma('synchronous = NORMAL');
      try {
        cache.statement('BEGIN IMMEDIATE').run();
        try {
          result = await work(tx);
          tx.finish();
          cache.statement('COMMIT').run();
        } catch (err) {
          if (connection.inTransaction) {
            if (tx.sent && !tx.committing) this.#tally.roundTrips++;
            cache.statement('ROLLBACK').run();
          }
          throw err;
        }
      } finally {
        connection.pragma('synchronous = FULL');
      }
    } finally {
      await this.#knex.client.releaseConnection(connection);
    }
    await this.#wal.durable();
    tx.committed();
    return result;
  }

  async close(): Promise<void> {
    this.#wal.close();
    this.#reads.connection.close();
  }
}
