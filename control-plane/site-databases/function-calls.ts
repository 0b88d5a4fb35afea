// A function's ctx.db calls, defined once for the three places that read them: the host (Node,
// services/function-context.ts), the worker's shim (deno-shim/db-line.ts) and the site's database
// process, which serves a worker's calls on a line of their own (deno/db-lines.ts). Each checks a
// call's arguments with the same code and says what went wrong in the same words; the database
// process's checks are the wall, the others only give a tenant the same errors sooner.
// Dependency-free and web-standard only, because Deno imports it too.
import type { SqlParam } from '../../runtime-host/context-contract.ts';
import type { FailureReason, RowValue, Statement, StatementOutcome } from './protocol.ts';
import { countStatements } from './statements.ts';

export const DB_METHODS = ['db.query', 'db.first', 'db.execute', 'db.batch'] as const;
export type DbMethod = (typeof DB_METHODS)[number];

export const isDbMethod = (method: unknown): method is DbMethod => DB_METHODS.includes(method as DbMethod);

/** A ctx.db call the function sees fail: a stable DATABASE_* code, and the provider's own words for the site's logs. */
export class FunctionCallError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly diagnostic?: string,
  ) {
    super(message);
  }
}

const isParam = (p: unknown): p is SqlParam => p === null || ['string', 'number', 'boolean'].includes(typeof p);

/** (sql, params?) as ctx.db takes them; an omitted params arrives as null (JSON has no undefined). */
export function statementArg(args: unknown[]): Statement {
  const [sql, given] = args;
  const params = given === null ? undefined : given;
  if (typeof sql !== 'string' || sql.trim() === '')
    throw new FunctionCallError('DATABASE_INVALID_ARGUMENT', 'sql must be a non-empty string');
  if (params !== undefined && !(Array.isArray(params) && params.every(isParam))) {
    throw new FunctionCallError(
      'DATABASE_INVALID_ARGUMENT',
      'params must be a list of strings, numbers, booleans or nulls',
    );
  }
  return { sql, params: (params as SqlParam[] | undefined) ?? [] };
}

/** The statements of a call's arguments: one, or a batch's several. */
export function callStatements(method: DbMethod, args: unknown[]): Statement[] {
  if (method !== 'db.batch') return [statementArg(args)];
  if (!Array.isArray(args[0]) || args[0].length === 0)
    throw new FunctionCallError('DATABASE_INVALID_ARGUMENT', 'batch takes a non-empty list of {sql, params?}');
  return args[0].map((item: unknown) =>
    statementArg([(item as { sql?: unknown })?.sql, (item as { params?: unknown })?.params]),
  );
}

/** Each statement of a ctx.db call is exactly one; checked once the site is known to have a database. */
export function checkStatement(statement: Statement): void {
  if (countStatements(statement.sql) !== 1) {
    throw new FunctionCallError(
      'DATABASE_MULTIPLE_STATEMENTS',
      'each ctx.db call runs exactly one statement; use batch() for several',
    );
  }
}

/**
 * How a statement the database did not complete reaches a function: our own messages are safe to
 * show; SQLite's and the provider's go to the site's logs as the diagnostic.
 */
export function functionFailure(reason: FailureReason | 'timeout' | 'busy' | 'unavailable' | 'moved', message: string) {
  switch (reason) {
    case 'reserved':
      return new FunctionCallError('DATABASE_RESERVED_TABLE', message);
    case 'denied':
      return new FunctionCallError('DATABASE_NOT_ALLOWED', message);
    case 'timeout':
      return new FunctionCallError('DATABASE_TIMEOUT', message);
    case 'too_large':
      return new FunctionCallError('DATABASE_RESULT_TOO_LARGE', message);
    case 'full':
      return new FunctionCallError('DATABASE_FULL', message);
    case 'busy':
    case 'unavailable':
      return new FunctionCallError('DATABASE_UNAVAILABLE', 'the database is unavailable; try again shortly', message);
    default:
      return new FunctionCallError(
        'DATABASE_QUERY_FAILED',
        'the statement failed; the site’s logs have the details',
        message,
      );
  }
}

/** One statement's outcome as a function sees it: a BLOB as the host's JSON renders a Node Buffer. */
export interface FunctionOutcome {
  rows: Array<Record<string, unknown>>;
  changes: number;
  lastInsertRowId: number | null;
}

/** What each method answers, from its statements' outcomes. */
export function callValue(method: DbMethod, outcomes: FunctionOutcome[]): unknown {
  switch (method) {
    case 'db.query':
      return outcomes[0]!.rows;
    case 'db.first':
      return outcomes[0]!.rows[0] ?? null;
    case 'db.execute':
      return { changes: outcomes[0]!.changes, lastInsertRowId: outcomes[0]!.lastInsertRowId };
    case 'db.batch':
      return outcomes;
  }
}

/** A database process's outcome as the host's path gives it to a function (a Buffer's JSON for a BLOB). */
export function functionOutcome(outcome: StatementOutcome): FunctionOutcome {
  return {
    rows: outcome.rows.map((row) => {
      const out: Record<string, unknown> = {};
      for (const [column, value] of Object.entries(row) as Array<[string, RowValue]>) {
        out[column] =
          value !== null && typeof value === 'object'
            ? { type: 'Buffer', data: [...Uint8Array.from(atob(value.$blob), (c) => c.charCodeAt(0))] }
            : value;
      }
      return out;
    }),
    changes: outcome.changes,
    lastInsertRowId: outcome.lastRowId,
  };
}
