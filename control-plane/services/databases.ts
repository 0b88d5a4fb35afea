// Site databases: one per site, created idempotently, queried through the API (one statement, the
// provider-style envelope) and from functions through ctx.db.
import crypto from 'node:crypto';
import { BerthError, conflict, notFound } from '../errors.ts';
import { type SqlParam, type Statement, StatementError } from '../site-databases/provider.ts';
import { countStatements } from '../site-databases/statements.ts';
import { FunctionCallError, checkStatement, functionFailure } from '../site-databases/function-calls.ts';
import { type Actor, type Deps, newId, timestamp } from '../deps.ts';
import { nextStep } from './next-step.ts';
import { type PageRequest, paginate } from './pagination.ts';
import { type DatabaseRow, requireDatabase, requireSite } from './site-rows.ts';
import { placeDatabase } from '../cluster/nodes.ts';

/** Runs a provider call that is not a tenant's statement: any failure of it is the database being unavailable. */
async function provider<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof StatementError) throw new BerthError('database_unavailable', err.message);
    throw err;
  }
}

/** A database as callers see it, with the space it takes and may take. */
async function toDatabase(deps: Deps, row: DatabaseRow) {
  return {
    id: row.id,
    status: row.status,
    sizeBytes: row.status === 'READY' ? await provider(() => deps.siteDatabases.size(row.site_id)) : 0,
    maxBytes: deps.config.siteDatabaseMaxBytes,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export async function listDatabases(deps: Deps, actor: Actor, siteId: string, page: PageRequest) {
  await requireSite(deps, actor, siteId);
  const query = deps.db('databases').where({ site_id: siteId }).orderBy('created_at');
  const { items, pagination } = await paginate(query, page, (row: DatabaseRow) => row);
  return { databases: await Promise.all(items.map((row) => toDatabase(deps, row))), pagination };
}

/** Creates the site's database, or resumes a creation that was interrupted; returns the existing one. */
export async function createDatabase(deps: Deps, actor: Actor, siteId: string) {
  const site = await requireSite(deps, actor, siteId);
  if (site.status !== 'ACTIVE')
    throw conflict('site_not_active', 'an archived site must be activated before it gets a database');
  let row = await deps.db<DatabaseRow>('databases').where({ site_id: siteId }).first();
  if (!row) {
    const now = timestamp(deps);
    row = {
      id: newId(),
      site_id: siteId,
      status: 'PROVISIONING',
      node_id: await placeDatabase(deps),
      created_at: now,
      updated_at: now,
    };
    await deps.db('databases').insert(row).onConflict('site_id').ignore();
    row = (await deps.db<DatabaseRow>('databases').where({ site_id: siteId }).first())!;
  }
  if (row.status !== 'READY') {
    await provider(() => deps.siteDatabases.create(siteId));
    await deps
      .db('databases')
      .where({ id: row.id })
      .update({ status: 'READY', updated_at: timestamp(deps) });
    await deps.changes.publish({ kind: 'database', siteId });
    row = (await deps.db<DatabaseRow>('databases').where({ id: row.id }).first())!;
  }
  return { database: await toDatabase(deps, row) };
}

function checkOneStatement(sql: string): void {
  const count = countStatements(sql);
  if (count === 0) throw new BerthError('invalid_request', 'sql holds no statement');
  if (count > 1)
    throw new BerthError('multiple_statements', `sql holds ${count} statements; this endpoint runs exactly one`);
}

/** The envelope's error code for a statement the database did not complete. */
const STATEMENT_ERROR_CODES: Partial<Record<StatementError['reason'], string>> = {
  denied: 'statement_not_allowed',
  reserved: 'statement_not_allowed',
  timeout: 'statement_timeout',
  too_large: 'result_too_large',
  full: 'database_full',
};

/**
 * The query endpoint: one statement, on the database or a preview's branch of it (`branch`), answered
 * in the provider-style envelope (success false when it failed).
 */
export async function queryDatabase(
  deps: Deps,
  actor: Actor,
  siteId: string,
  databaseId: string,
  input: { sql: string; params?: SqlParam[] | undefined; readOnly?: boolean | undefined; branch?: string | undefined },
) {
  await requireDatabase(deps, actor, siteId, databaseId);
  checkOneStatement(input.sql);
  const run = (database: string) =>
    deps.siteDatabases.run(database, { sql: input.sql, params: input.params ?? [] }, 'api', {
      readsOnly: input.readOnly === true,
    });
  try {
    const result = input.branch ? await deps.onBranch(siteId, input.branch, run) : await run(siteId);
    return {
      success: true,
      errors: [],
      messages: [],
      result: [
        {
          success: true,
          results: result.rows,
          meta: {
            duration: Math.round(result.durationMs * 1000) / 1000,
            changes: result.changes,
            last_row_id: result.lastRowId,
          },
        },
      ],
    };
  } catch (err) {
    if (!(err instanceof StatementError)) throw err;
    if (err.reason === 'busy' || err.reason === 'unavailable')
      throw new BerthError('database_unavailable', err.message);
    // The statement's own failure is part of the answer, as the provider-style envelope has it.
    return {
      success: false,
      errors: [{ code: STATEMENT_ERROR_CODES[err.reason] ?? 'statement_failed', message: err.message }],
      messages: [],
      result: [],
    };
  }
}

/** Whether the site's database is ready, from the cache that database changes clear. */
export async function hasDatabase(deps: Deps, siteId: string): Promise<boolean> {
  let ready = deps.hostingCache.hasDatabase(siteId);
  if (ready === undefined) {
    const generation = deps.hostingCache.generation();
    ready = Boolean(await deps.db<DatabaseRow>('databases').where({ site_id: siteId, status: 'READY' }).first('id'));
    deps.hostingCache.rememberDatabase(generation, siteId, ready);
  }
  return ready;
}

/** What a branch that cannot be had is to a function: its own code, and the same words as the API's. */
const BRANCH_FAILURES: Partial<Record<string, string>> = {
  branch_failed: 'DATABASE_BRANCH_FAILED',
  branch_not_found: 'DATABASE_BRANCH_NOT_FOUND',
  before_history: 'DATABASE_BEFORE_HISTORY',
  quota_exceeded: 'DATABASE_QUOTA_EXCEEDED',
  database_unavailable: 'DATABASE_UNAVAILABLE',
};

/**
 * Runs statements for a function of `siteId`: one, or several in one transaction, on the site's
 * database or on its branch `branch` (a preview's, made on its first call).
 */
export async function runForFunction(
  deps: Deps,
  siteId: string,
  statements: Statement[],
  branch?: string,
): Promise<Array<{ rows: Array<Record<string, unknown>>; changes: number; lastInsertRowId: number | null }>> {
  if (!(await hasDatabase(deps, siteId)))
    throw new FunctionCallError(
      'DATABASE_NOT_FOUND',
      'this site has no database yet; create one with POST /v0/sites/:siteId/databases',
    );
  statements.forEach(checkStatement);
  const run = async (database: string) =>
    statements.length === 1
      ? [await deps.siteDatabases.run(database, statements[0]!, 'function')]
      : await deps.siteDatabases.batch(database, statements, 'function');
  try {
    const results = branch ? await deps.onBranch(siteId, branch, run) : await run(siteId);
    return results.map((r) => ({ rows: r.rows, changes: r.changes, lastInsertRowId: r.lastRowId }));
  } catch (err) {
    if (err instanceof BerthError && BRANCH_FAILURES[err.code])
      throw new FunctionCallError(BRANCH_FAILURES[err.code]!, err.message);
    throw err instanceof StatementError ? functionFailure(err.reason, err.message) : err;
  }
}

/**
 * Rewrites the database without the free space deleted rows left (VACUUM), between statements: what
 * tenants cannot run themselves. Databases made by an earlier Berth also switch to incremental
 * auto-vacuum, after which Berth gives free space back by itself.
 */
export async function compactDatabase(deps: Deps, actor: Actor, siteId: string, databaseId: string) {
  await requireDatabase(deps, actor, siteId, databaseId);
  try {
    const { bytesBefore, bytesAfter } = await deps.siteDatabases.compact(siteId);
    return { databaseId, bytesBefore, bytesAfter };
  } catch (err) {
    if (err instanceof StatementError) throw new BerthError('database_unavailable', err.message);
    throw err;
  }
}

/** The moments the database can be restored to, from its replica (each one second apart at most). */
export async function databaseRestorePoints(deps: Deps, actor: Actor, siteId: string, databaseId: string) {
  const row = await requireDatabase(deps, actor, siteId, databaseId);
  const points = await provider(() => deps.siteDatabases.restorePoints(siteId));
  return { database: { id: row.id, status: row.status }, ...points };
}

/**
 * Puts the database back as it was at `at` (to the second). Calls in flight finish first and new ones
 * wait; the moment just before (`restoredFrom`) stays restorable, so a restore can itself be undone.
 */
export async function restoreDatabase(deps: Deps, actor: Actor, siteId: string, databaseId: string, at: string) {
  const row = await requireDatabase(deps, actor, siteId, databaseId);
  const moment = new Date(at);
  const result = await provider(() => deps.siteDatabases.restore(siteId, moment));
  if (!result.restored)
    throw new BerthError(
      'restore_point_unavailable',
      result.earliest
        ? `${at} is outside what the database can be restored to: from ${result.earliest} to ${result.latest}`
        : 'the database has no replicated history to restore from yet; try again in a few seconds',
      { earliest: result.earliest, latest: result.latest },
    );
  deps.log.info(
    { siteId, databaseId, restoredTo: result.restoredTo, restoredFrom: result.restoredFrom },
    'restored a site database',
  );
  return {
    database: { id: row.id, status: row.status },
    restoredTo: result.restoredTo,
    restoredFrom: result.restoredFrom,
  };
}

const CHALLENGE_MS = 10 * 60_000;
const CODE_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';

/** Step one of deletion: a code that deletes this database, and only it, for ten minutes. */
export async function createDeletionChallenge(deps: Deps, actor: Actor, siteId: string, databaseId: string) {
  await requireDatabase(deps, actor, siteId, databaseId);
  const code = `DELETE-${Array.from(crypto.randomBytes(8), (b) => CODE_ALPHABET[b % CODE_ALPHABET.length]).join('')}`;
  const expiresAt = new Date(deps.now().getTime() + CHALLENGE_MS).toISOString();
  await deps.db('database_deletion_challenges').insert({ code, database_id: databaseId, expires_at: expiresAt });
  return {
    confirmationCode: code,
    expiresAt,
    next: nextStep('delete_database', { siteId, databaseId, confirmationCode: code }),
  };
}

/** Step two: with a current code of this database, removes the binding, then the database itself. */
export async function deleteDatabase(
  deps: Deps,
  actor: Actor,
  siteId: string,
  databaseId: string,
  confirmationCode: string,
) {
  await requireSite(deps, actor, siteId);
  const row = await deps.db<DatabaseRow>('databases').where({ id: databaseId, site_id: siteId }).first();
  if (!row) throw notFound('database');
  const challenge = await deps.db('database_deletion_challenges').where({ code: confirmationCode }).first();
  if (!challenge || challenge.database_id !== databaseId) {
    throw new BerthError(
      'invalid_confirmation_code',
      'this is not a confirmation code for this database; create a deletion challenge first',
    );
  }
  if (new Date(challenge.expires_at as string) <= deps.now()) {
    throw new BerthError('confirmation_code_expired', 'the confirmation code expired; create a new deletion challenge');
  }
  // The binding goes first: from here on nothing reaches the database, even if removing it fails.
  await deps.db.transaction(async (trx) => {
    await trx('databases').where({ id: databaseId }).delete();
    await trx('database_deletion_challenges').where({ database_id: databaseId }).delete();
    await trx('migration_leases').where({ database_id: databaseId }).delete();
    // Its previews' branches go with it (the provider removes their files with the database's).
    await trx('database_branches').where({ site_id: siteId }).delete();
  });
  await deps.changes.publish({ kind: 'database', siteId });
  await deps.siteDatabases.remove(siteId, row.node_id);
  return { deleted: true as const, databaseId };
}
