// The metadata statements every request runs (who holds this key, is this bucket theirs, which file is
// current) and the file-version commits, behind one port with an adapter per backend: better-sqlite3
// prepared statements on SQLite (sqlite/hot-sql.ts), `pg` prepared statements on a pool on PostgreSQL
// (postgres/hot-sql.ts). Knex's builder costs close to a hundred microseconds per query; a statement
// prepared once costs a few. Everything else goes through Knex.
//
// The SQL is written once, in the dialect both engines share: `?` placeholders (never inside a
// literal), `IS DISTINCT FROM`, `ON CONFLICT`, `RETURNING`, and values whose type the statement fixes
// (a column compared or assigned), so PostgreSQL can type every parameter.

export type Param = string | number | null | Buffer;

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
}

export interface HotSql {
  /** The first row of a read, from committed data. */
  get<T>(sql: string, ...params: Param[]): Promise<T | undefined>;
  /**
   * Runs `work` as one transaction and resolves once its commit is durable. `work` runs alone on its
   * connection: it must only await the transaction's own statements.
   */
  write<T>(work: (tx: HotTx) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}
