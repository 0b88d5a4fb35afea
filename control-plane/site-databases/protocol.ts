// The messages between Berth (Node) and a site database process (Deno, deno/sqlite-host.ts),
// defined once for both sides. Frames are the runtime's (runtime-host/protocol.ts): the host writes
// requests to the process's stdin and reads results from its stdout, in order.
// Dependency-free and web-standard only, because Deno imports it too.
import type { SqlParam } from '../../runtime-host/context-contract.ts';

export const DbFrame = {
  /** process → host, once the database is open and confined. Payload: empty. */
  Ready: 1,
  /** host → process: one operation. Payload: JSON DbRequest. */
  Request: 2,
  /** process → host: an operation's outcome. Payload: JSON DbResult. */
  Result: 3,
  /** process → host: a piece of a dump in progress (SQL text). */
  DumpChunk: 4,
  /** process → host, at any time (stream 0): what the workers' lines did. Payload: JSON LineStats. */
  Stats: 5,
} as const;

/**
 * The frames of a line between a function's worker and its site's database process (deno/db-lines.ts,
 * deno-shim/db-line.ts), in the runtime's framing. The process connects to the worker's socket at
 * the host's word and says Hello with the token the worker gave the host; the worker then sends Calls,
 * which the process answers in order, and the process says Closed before it closes the line at the
 * host's request: the calls it has not answered then were never run.
 */
export const LineFrame = {
  /** process → worker, first and once: the token the worker asked the line with (UTF-8). */
  Hello: 1,
  /** worker → process: one ctx.db call. Payload: JSON LineCall. */
  Call: 2,
  /** process → worker: a call's outcome. Payload: JSON LineAnswer. */
  Answer: 3,
  /** process → worker: the line closes; the calls not answered were not run. Payload: empty. */
  Closed: 4,
} as const;

/** A ctx.db call on a line: the method and its arguments, as the function gave them. */
export interface LineCall {
  method: string;
  args: unknown[];
}

/** A call's outcome; `code` and the host's message when its arguments fail the host's checks. */
export type LineAnswer = DbResult | { ok: false; error: { code: string; message: string } };

/** A token is this many hex characters. */
export const LINE_TOKEN_CHARS = 64;

/**
 * What the lines of a database process did since it last said: ctx.db calls by method, each
 * statement or batch's outcome and seconds, and when the first of them that wrote was received.
 */
export interface LineStats {
  calls: Record<string, number>;
  statements: Array<[ok: boolean, seconds: number]>;
  firstWriteAt: number | null;
}

/** The migration ledger, kept in each site database and reserved from functions and migrations. */
export const LEDGER_TABLE = '_berth_migrations';

/** Made when the database is opened, so the ledger is in place (and guarded) before any tenant SQL runs. */
export const LEDGER_DDL = `CREATE TABLE IF NOT EXISTS ${LEDGER_TABLE} (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE,
  checksum TEXT NOT NULL,
  sql TEXT,
  applied_at TEXT NOT NULL
)`;

/**
 * Whose SQL a statement is, which decides what the database's authorizer lets it do:
 * - `function`: a function's ctx.db call; the ledger is out of reach;
 * - `api`: the query endpoint, called with the site's own WRITE key; the ledger may be read and written;
 * - `system`: Berth's own statements (ledger, receipts), never tenant text.
 * Migrations run their SQL as `migration`, which, like `function`, cannot touch the ledger.
 */
export type Access = 'function' | 'api' | 'system';
export type Mode = Access | 'migration';

export type { SqlParam };

export interface Statement {
  sql: string;
  params: SqlParam[];
}

/**
 * `readOnly` runs a statement or batch on a database whose writes are paused (it is being copied to
 * another node): reads run as usual, and a write fails as `read_only` without changing anything.
 * `readsOnly` is the caller's own ask (the query API's `readOnly`): the statement must be one that only
 * reads, as the authorizer saw it prepared, and runs with SQLite refusing writes; anything else fails
 * as `denied` without changing anything.
 * `checkpoint` moves the write-ahead log into the database file, so the file alone is the database;
 * `census` checks the file's integrity and counts every table's rows but the replicator's (its
 * bookkeeping on one node).
 * `connect` opens a line to the worker the host has linked the process's line path to, saying
 * Hello with the worker's `token`, and is answered once it has; `ping` is answered between two
 * statements, so one unanswered in time is a statement past its limit; `close-lines` closes every
 * line, and is answered once no line statement runs. Both answer after a Stats frame with what
 * the lines did so far.
 */
export type DbRequest =
  | { op: 'run'; access: Access; statement: Statement; readOnly?: boolean; readsOnly?: boolean }
  | { op: 'batch'; access: Access; statements: Statement[]; readOnly?: boolean }
  | { op: 'migrate'; sql: string; receipt: Statement }
  | { op: 'dump' }
  | { op: 'checkpoint' }
  | { op: 'census' }
  | { op: 'connect'; token: string }
  | { op: 'ping' }
  | { op: 'close-lines' };

/** What a database holds, as two copies of it must agree on: SQLite's integrity check and each table's row count. */
export interface Census {
  integrity: string;
  tables: Record<string, number>;
}

/** A BLOB value travels as base64, since JSON has no bytes. */
export interface EncodedBlob {
  $blob: string;
}

export type RowValue = string | number | null | EncodedBlob;

export interface StatementOutcome {
  rows: Array<Record<string, RowValue>>;
  changes: number;
  lastRowId: number | null;
  durationMs: number;
}

/**
 * Why a statement failed: `failed` is SQLite's own error, `denied` a capability site databases do
 * not have, `reserved` the ledger used where it is out of reach, `too_large` a result over the cap,
 * `full` a write past the database's size limit, `read_only` a write while writes are paused (never
 * shown to a tenant: Berth waits and sends it again).
 */
export type FailureReason = 'failed' | 'denied' | 'reserved' | 'too_large' | 'full' | 'read_only';

/** What compacting a database gave back. */
export interface Compaction {
  bytesBefore: number;
  bytesAfter: number;
}

export type DbResult =
  | { ok: true; value: StatementOutcome | StatementOutcome[] | { bytes: number } | Compaction | Census | null }
  | { ok: false; error: { reason: FailureReason; message: string } };

/** A statement's rows may hold at most this much JSON, so no result can flood either process. */
export const MAX_RESULT_BYTES = 16 * 1024 * 1024;
/** Frames larger than this (header included) break the protocol: results are capped above, dumps come in pieces. */
export const MAX_DB_FRAME_BYTES = MAX_RESULT_BYTES + 1024 * 1024;
