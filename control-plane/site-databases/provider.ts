// What a site database is to the rest of Berth: the provider interface services call, and the results
// and errors every provider gives. Two implement it: the local provider (local-provider.ts), over the
// data dir's files, and on shared metadata the placed provider (cluster/placed-provider.ts), which
// sends each call to the node that holds the database.
import type { Access, Census, Compaction, FailureReason, Statement } from './protocol.ts';

export type { Access, Census, Compaction, SqlParam, Statement } from './protocol.ts';

export interface StatementResult {
  rows: Array<Record<string, unknown>>;
  changes: number;
  lastRowId: number | null;
  durationMs: number;
}

/**
 * A statement that did not run to completion. `reason` says why: SQLite refused it (`failed`), it
 * asked for a capability site databases do not have (`denied`), it used the migration ledger where
 * that is reserved (`reserved`), its result was too large (`too_large`), it needed more space than the
 * database may take (`full`), it ran past its time limit
 * (`timeout`), or no database process could serve it (`busy`, `unavailable`), or the database was
 * moved to another node while it waited or was in flight (`moved`: the caller sends it where it is
 * now). Messages name no host path.
 */
export class StatementError extends Error {
  constructor(
    readonly reason: FailureReason | 'timeout' | 'busy' | 'unavailable' | 'moved',
    message: string,
  ) {
    super(message);
  }
}

export interface RunOptions {
  readsOnly?: boolean;
}

/** What a call of a branch this node does not have fails with (`unavailable`): it was dropped, or made where the database was before a move. */
export const BRANCH_NOT_HERE = 'the branch of the database is not here';

export const isBranchNotHere = (err: unknown): boolean =>
  err instanceof StatementError && err.reason === 'unavailable' && err.message === BRANCH_NOT_HERE;

/** A branch made (makeBranch): from the replica's history or a copy of the database now, as of when, its bytes. */
export interface BranchMade {
  from: 'history' | 'copy';
  asOf: string;
  bytes: number;
}

/**
 * A database is named by its site's id. A branch of it (a preview's copy) is named by its branch name
 * (branch-names.ts), which `run`, `batch`, `migrate` and `size` take as well; every other call is of a
 * site's own database.
 */
export interface SiteDatabaseProvider {
  /** Creates the database if it does not exist; safe to repeat. */
  create(siteId: string): Promise<void>;
  /**
   * Runs one statement, atomically. With `readsOnly` it must only read: one that may write, or set a
   * pragma, fails as `denied` and changes nothing (the query API's `readOnly`).
   */
  run(siteId: string, statement: Statement, access: Access, options?: RunOptions): Promise<StatementResult>;
  /** Runs statements in one transaction: all of them or none. */
  batch(siteId: string, statements: Statement[], access: Access): Promise<StatementResult[]>;
  /**
   * Runs a migration's SQL (one or more statements) and `receipt` in one transaction, so either both
   * are committed or neither is.
   */
  migrate(siteId: string, sql: string, receipt: Statement): Promise<void>;
  /** Writes SQL text that rebuilds the database's schema and data in an empty database to `file`; returns its size. */
  dump(siteId: string, file: string): Promise<number>;
  /** Rewrites the database without free space, between statements; says what that gave back. */
  compact(siteId: string): Promise<Compaction>;
  /** The moments the database can be restored to, from its replica. */
  restorePoints(siteId: string): Promise<RestorePoints>;
  /**
   * Puts the database back as it was at `at` (calls in flight finish first, new ones wait), or says
   * what it can be restored to when `at` is outside that.
   */
  restore(siteId: string, at: Date): Promise<Restore>;
  /**
   * Makes the branch `name` of a site's database, beside it: the database as it was at `at`, from its
   * replica, or, when the replica does not hold that moment and `orNow`, a copy of it as it is now. A
   * branch of that name made before is replaced. Fails `unavailable` (saying why) when neither can be had.
   */
  makeBranch(name: string, at: Date, orNow: boolean): Promise<BranchMade>;
  /** Removes the branch `name`; nothing when there is none. */
  dropBranch(name: string): Promise<void>;
  /** The space the database takes on disk now, its write-ahead log included. */
  size(siteId: string): Promise<number>;
  /**
   * Removes the database. `heldBy` names the node that held it when its placement is already gone from
   * the metadata (a provider over several nodes needs it; one over a data dir does not).
   */
  remove(siteId: string, heldBy?: string | null): Promise<void>;
  /**
   * A line for one worker of the site straight to the database's process, for its ctx.db calls:
   * opened only when the database is served here, in its normal state (false when not: the worker's
   * calls then come through the host). The process connects to the worker's socket `link` and says
   * Hello with the worker's `token`. `onCalls` hears the line's calls by method, for the host's counts.
   */
  openLine(
    siteId: string,
    link: string,
    token: string,
    onCalls: (calls: Record<string, number>) => void,
  ): Promise<boolean>;
  /** What the line opened with `token` broke off for: the error its calls not answered get. */
  lineLost(siteId: string, token: string): Promise<StatementError>;
  /** Closes the lines of a site, or of every site (none given); the next call is given a new one. */
  closeLines(siteId?: string): Promise<void>;
  /** ctx.db calls served on workers' lines so far (as reported), for tests and diagnostics. */
  readonly lineCalls: number;
  close(): Promise<void>;
}

/** The oldest and newest moment a database's replica can give back (ISO 8601; null: none yet). */
export interface RestorePoints {
  earliest: string | null;
  latest: string | null;
  /** How its replication goes now (null: the database is not in use, so nothing waits to be shipped). */
  replication?: ReplicationState | null;
}

export interface ReplicationState {
  /** How long its oldest write not yet known to be in the replica has waited. */
  lagMs: number;
  /** When the replica last received some of its writes (since the node that holds it started). */
  replicatedAt: string | null;
  /** The bytes its replica takes: snapshots and log, over the retention or less (replicaMaxBytes). */
  replicaBytes: number;
  /** The bytes its replica may take: past them its oldest history is dropped (BERTH_DATABASE_REPLICA_MAX_BYTES). */
  replicaMaxBytes: number;
}

export type Restore =
  | { restored: true; restoredTo: string; restoredFrom: string }
  | ({ restored: false } & RestorePoints);

/** A database whose writes are paused while its file is copied (SiteDatabases.freeze). */
export interface FrozenDatabase {
  /** The database file: whole (its write-ahead log is in it) and unchanged until thawed. */
  readonly file: string;
  /** What the file holds, counted by the database's own process. */
  census(): Promise<Census>;
  /**
   * Ends the pause. `moved`: the database now lives on another node; the writes that waited are told
   * so (StatementError `moved`), then the file is removed, and a call still in flight on it is told so
   * too. `kept`: they run here.
   */
  thaw(outcome: 'moved' | 'kept'): Promise<void>;
}
