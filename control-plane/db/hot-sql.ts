// The metadata statements every request runs (who holds this key, is this bucket theirs, which file is
// current) and the file-version commits, behind one port with an adapter per backend: better-sqlite3
// prepared statements on SQLite (sqlite/hot-sql.ts), `pg` prepared statements on a pool on PostgreSQL
// (postgres/hot-sql.ts). Knex's builder costs close to a hundred microseconds per query; a statement
// prepared once costs a few. Everything else goes through Knex.
//
// The SQL is written once, in the dialect both engines share: `?` placeholders (never inside a
// literal), `IS DISTINCT FROM`, `ON CONFLICT`, `RETURNING`, and values whose type the statement fixes
// (a column compared or assigned), so PostgreSQL can type every parameter.
//
// On PostgreSQL each wait for an answer is a round trip to another process, and a row lock a write
// holds is held for every round trip until its commit. So a write sends what it can together: a batch
// of statements in one round trip, and the statements whose answers it does not need with its COMMIT.

export type Param = string | number | null | Buffer;

/** A statement with its parameters, for a batch or the commit. */
export interface Statement {
  sql: string;
  params: Param[];
  /** The rows it selects are locked until the transaction ends, as getForUpdate locks them. */
  forUpdate?: boolean;
}

export const statement = (sql: string, ...params: Param[]): Statement => ({ sql, params });

/** A SELECT whose rows stay locked until the transaction ends (see HotTx.getForUpdate). */
export const lockingStatement = (sql: string, ...params: Param[]): Statement => ({ sql, params, forUpdate: true });

/** What one statement of a batch gave: the rows it returned, and the rows it changed (or, a SELECT, returned). */
export interface StatementResult {
  rows: unknown[];
  changes: number;
}

/**
 * Refuses a statement that selects `*`: a prepared statement's columns are fixed when it is prepared,
 * and PostgreSQL fails one whose table gained a column since ("cached plan must not change result
 * type"). Nodes of the previous release run beside a newer schema during a rolling upgrade, so every
 * hot statement names its columns, and a migration may add some.
 */
export function checkColumnsNamed(sql: string): void {
  if (/(^|[\s,])(\w+\.)?\*(\s|,|$)/.test(sql)) throw new Error(`a hot statement names its columns, never *: ${sql}`);
}

/** What a write transaction may do. */
export interface HotTx {
  get<T>(sql: string, ...params: Param[]): Promise<T | undefined>;
  all<T>(sql: string, ...params: Param[]): Promise<T[]>;
  run(sql: string, ...params: Param[]): Promise<{ changes: number }>;
  /**
   * The first row of a SELECT, locked until the transaction ends, so that two transactions that read
   * the same row to change it take turns (PostgreSQL's FOR UPDATE; on SQLite every write transaction
   * holds the database's one write lock already).
   */
  getForUpdate<T>(sql: string, ...params: Param[]): Promise<T | undefined>;
  /**
   * Runs the statements one after the other in the order of their names (names that are not numbers),
   * as one round trip: PostgreSQL gets them together and answers them together. Each sees what those
   * before it did, as if it were awaited alone. Resolves with each one's result under its name; one
   * left undefined is not run and reads as one that returned and changed nothing. The first that fails
   * rejects the batch with its error, and those after it change nothing.
   */
  batch<K extends string>(statements: Record<K, Statement | undefined>): Promise<Record<K, StatementResult>>;
  /**
   * Statements whose answers the work does not need: they run in this order after every other statement
   * of the transaction, just before its commit and in the same round trip as it. One that fails rolls
   * the transaction back, and the write rejects with its error.
   */
  commitWith(...statements: Statement[]): void;
  /** Runs `then` once the transaction has committed (before the write resolves); never if it rolls back. */
  afterCommit(then: () => void): void;
}

export interface HotSql {
  /** The first row of a read, from committed data. */
  get<T>(sql: string, ...params: Param[]): Promise<T | undefined>;
  /**
   * Runs `work` as one transaction and resolves once its commit is durable. `work` runs alone on its
   * connection: it must only await the transaction's own statements. The transaction begins with the
   * first statement it sends, in the same round trip.
   */
  write<T>(work: (tx: HotTx) => Promise<T>): Promise<T>;
  /**
   * The times a caller has waited on the database so far: each read, each statement of a write awaited
   * alone, each batch, each commit or rollback. On PostgreSQL each is a round trip to the server; SQLite
   * counts the same calls, made in the process.
   */
  readonly roundTrips: number;
  close(): Promise<void>;
}
