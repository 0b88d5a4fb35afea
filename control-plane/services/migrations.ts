// Numbered SQL migrations of a site database. The ledger (_berth_migrations) lives in the site database
// itself, and each migration's schema change commits together with its receipt (name, SHA-256, exact
// SQL, applied time): a migration is either applied and recorded, or neither. A lease allows one run at
// a time per database.
import crypto from 'node:crypto';
import { BerthError, conflict, notFound } from '../errors.ts';
import { StatementError } from '../site-databases/provider.ts';
import type { Actor, Deps } from '../deps.ts';
import { nextStep } from './next-step.ts';
import { LEDGER_TABLE } from '../site-databases/protocol.ts';
import { requireDatabase } from './site-rows.ts';
import { lockRows } from '../db/locks.ts';
import { leftByThisNode } from '../db/node-work.ts';

export const MIGRATION_NAME = /^\d{4}_[A-Za-z0-9_-]+\.sql$/;
const LEASE_MS = 10 * 60_000;

interface ReceiptRow {
  id: number;
  name: string;
  checksum: string;
  sql: string | null;
  applied_at: string;
}

const checksum = (sql: string) => crypto.createHash('sha256').update(sql).digest('hex');
/** `YYYY-MM-DD HH:MM:SS`, UTC. */
const appliedAt = (date: Date) => date.toISOString().slice(0, 19).replace('T', ' ');

const toReceipt = (row: ReceiptRow) => ({
  id: row.id,
  name: row.name,
  checksum: row.checksum,
  appliedAt: row.applied_at,
  sourceAvailable: row.sql !== null,
});

/** The receipts of a database: a site's (its id), or a branch of it (its name). */
async function ledger(deps: Deps, database: string): Promise<ReceiptRow[]> {
  return (
    await deps.siteDatabases.run(
      database,
      { sql: `SELECT id, name, checksum, sql, applied_at FROM ${LEDGER_TABLE} ORDER BY id`, params: [] },
      'system',
    )
  ).rows as unknown as ReceiptRow[];
}

/** After a conflict or a run: the receipts say exactly what is applied. */
const listReceipts = (siteId: string, databaseId: string) =>
  nextStep('list_database_migrations', { siteId, databaseId });

export async function listMigrations(deps: Deps, actor: Actor, siteId: string, databaseId: string) {
  const db = await requireDatabase(deps, actor, siteId, databaseId);
  return { database: { id: db.id, status: db.status }, applied: (await ledger(deps, siteId)).map(toReceipt) };
}

export async function getMigration(deps: Deps, actor: Actor, siteId: string, databaseId: string, name: string) {
  await requireDatabase(deps, actor, siteId, databaseId);
  const row = (await ledger(deps, siteId)).find((r) => r.name === name);
  if (!row) throw notFound('migration');
  // A legacy receipt has no stored SQL; none is invented for it.
  return {
    migration: {
      name: row.name,
      checksum: row.checksum,
      sourceAvailable: row.sql !== null,
      ...(row.sql !== null ? { sql: row.sql } : {}),
    },
  };
}

function checkName(name: string): void {
  if (!MIGRATION_NAME.test(name))
    throw new BerthError(
      'invalid_migration_name',
      `migration names look like 0001_create_notes.sql (<NNNN>_<description>.sql); got "${name}"`,
    );
}

/** Runs `work` holding the database's migration lease; a live lease held by another run is a 409. */
async function withLease<T>(deps: Deps, siteId: string, databaseId: string, work: () => Promise<T>): Promise<T> {
  const holder = crypto.randomUUID();
  const now = deps.now();
  const acquired = await deps.db.transaction(async (trx) => {
    // Runs on any server take turns on the database's row, so one of two racing runs sees the other's lease.
    await lockRows(trx, 'databases', { id: databaseId });
    const lease = await trx('migration_leases').where({ database_id: databaseId }).first();
    if (lease && new Date(lease.expires_at as string) > now)
      return lease as { acquired_at: string; expires_at: string };
    await trx('migration_leases').where({ database_id: databaseId }).delete();
    await trx('migration_leases').insert({
      database_id: databaseId,
      holder,
      node_id: deps.nodeId,
      acquired_at: now.toISOString(),
      expires_at: new Date(now.getTime() + LEASE_MS).toISOString(),
    });
    return null;
  });
  if (acquired) {
    throw conflict(
      'migration_in_progress',
      'another migration run holds this database’s lease; wait for it, then list the receipts before retrying',
      {
        leaseAcquiredAt: acquired.acquired_at,
        leaseExpiresAt: acquired.expires_at,
        next: listReceipts(siteId, databaseId),
      },
    );
  }
  try {
    return await work();
  } finally {
    await deps.db('migration_leases').where({ database_id: databaseId, holder }).delete();
  }
}

/**
 * Drops the leases this node's previous process left when it stopped mid-run. Called at start-up,
 * before any request: none of this node's leases can be live then. Other servers' leases are theirs
 * (and expire by themselves should their server be gone).
 */
export async function releaseLeftoverLeases(deps: Deps): Promise<void> {
  const released = await leftByThisNode(deps.db, 'migration_leases', deps.nodeId).delete();
  if (released > 0) deps.log.warn({ released }, 'released migration leases of the previous process');
}

/**
 * Runs `script` and writes the receipts of `batch` in one transaction of the site database; a statement
 * of the script that fails rolls it all back, and `failed` says how it failed.
 */
async function runWithReceipts(
  deps: Deps,
  database: string,
  script: string,
  batch: Array<{ name: string; sql: string }>,
  failed: (err: StatementError) => BerthError,
): Promise<void> {
  const at = appliedAt(deps.now());
  try {
    await deps.siteDatabases.migrate(database, script, {
      sql: `INSERT INTO ${LEDGER_TABLE} (name, checksum, sql, applied_at) VALUES ${batch.map(() => '(?, ?, ?, ?)').join(', ')}`,
      params: batch.flatMap((m) => [m.name, checksum(m.sql), m.sql, at]),
    });
  } catch (err) {
    if (!(err instanceof StatementError)) throw err;
    if (err.reason === 'busy' || err.reason === 'unavailable')
      throw new BerthError('database_unavailable', err.message);
    throw failed(err);
  }
}

/** Applies one migration: its SQL and receipt in one transaction. */
function applyOne(deps: Deps, siteId: string, name: string, sql: string): Promise<void> {
  return runWithReceipts(
    deps,
    siteId,
    sql,
    [{ name, sql }],
    (err) =>
      new BerthError('migration_failed', `${name} failed and was rolled back; no receipt was written: ${err.message}`, {
        failedName: name,
        providerMessage: err.message,
        recovery: 'fix the SQL and apply it under a name that has never been applied',
      }),
  );
}

/** Applies `pending` one by one; a failure names, in its details, those applied before it. */
async function applyEach(deps: Deps, siteId: string, pending: Array<{ name: string; sql: string }>): Promise<string[]> {
  const appliedNames: string[] = [];
  for (const migration of pending) {
    try {
      await applyOne(deps, siteId, migration.name, migration.sql);
    } catch (err) {
      if (err instanceof BerthError && err.details) err.details.appliedNames = appliedNames;
      throw err;
    }
    appliedNames.push(migration.name);
  }
  return appliedNames;
}

/** Applies `pending` in one transaction with their receipts: a failure leaves the database as it was. */
async function applyTogether(
  deps: Deps,
  database: string,
  pending: Array<{ name: string; sql: string }>,
): Promise<string[]> {
  if (pending.length === 0) return [];
  const which = pending.length === 1 ? pending[0]!.name : `one of ${pending.map((m) => m.name).join(', ')}`;
  // The scripts one after the other, each ended, and one statement writing all their receipts.
  await runWithReceipts(
    deps,
    database,
    pending.map((m) => `${m.sql}\n;\n`).join(''),
    pending,
    (err) =>
      new BerthError('migration_failed', `${which} failed and everything was rolled back: ${err.message}`, {
        failedName: pending.length === 1 ? pending[0]!.name : null,
        providerMessage: err.message,
      }),
  );
  return pending.map((m) => m.name);
}

function historyConflict(
  siteId: string,
  databaseId: string,
  name: string,
  message: string,
  applied: ReceiptRow | undefined,
) {
  return conflict('migration_history_conflict', message, {
    name,
    appliedChecksum: applied?.checksum ?? null,
    appliedAt: applied?.applied_at ?? null,
    recovery: 'applied migrations are never edited: write a new forward migration with the next number',
    next: listReceipts(siteId, databaseId),
  });
}

/** An ordered history as sent: valid names, each once, in ascending order of their numbers. */
function checkOrderedList(migrations: Array<{ name: string }>): void {
  for (const m of migrations) checkName(m.name);
  const names = migrations.map((m) => m.name);
  const sorted = [...names].sort();
  if (names.some((n, i) => n !== sorted[i]) || new Set(names).size !== names.length)
    throw new BerthError('invalid_request', 'migrations must be listed once each, in ascending order of their numbers');
}

/** Applies one named migration (confirm: true); the same name and SQL again is alreadyApplied. */
export async function applyMigration(
  deps: Deps,
  actor: Actor,
  siteId: string,
  databaseId: string,
  input: { name: string; sql: string },
) {
  await requireDatabase(deps, actor, siteId, databaseId, { activeSite: true });
  checkName(input.name);
  return withLease(deps, siteId, databaseId, async () => {
    const applied = (await ledger(deps, siteId)).find((r) => r.name === input.name);
    if (applied) {
      if (applied.checksum !== checksum(input.sql)) {
        throw historyConflict(
          siteId,
          databaseId,
          input.name,
          `${input.name} was already applied with different SQL`,
          applied,
        );
      }
      return { migration: { name: input.name, sql: input.sql }, alreadyApplied: true };
    }
    await applyOne(deps, siteId, input.name, input.sql);
    return { migration: { name: input.name, sql: input.sql }, alreadyApplied: false };
  });
}

/**
 * Where an ordered list of migrations comes from. A request's are applied one by one, each with its
 * receipt (those applied before a failure stay, and the error names them); a deployment's are applied
 * before its switch, all in one transaction with their receipts, so a failure leaves the database as
 * it was.
 */
export type MigrationSource = 'request' | 'deployment';

/** The ledger must be the head of the list exactly: the same names in the same order, with the same SQL. */
function checkLedgerHead(
  siteId: string,
  databaseId: string,
  applied: ReceiptRow[],
  migrations: Array<{ name: string; sql: string }>,
  source: MigrationSource,
): void {
  applied.forEach((receipt, i) => {
    const given = migrations[i];
    if (given && given.name === receipt.name && checksum(given.sql) === receipt.checksum) return;
    const message =
      source === 'deployment'
        ? `the deployment's migrations disagree with the database at position ${i + 1}: ${receipt.name} is applied there`
        : given
          ? `the list disagrees with the database at position ${i + 1}: ${receipt.name} is applied there`
          : `the database has ${receipt.name} applied, which the list does not include: send the whole ordered history`;
    throw historyConflict(siteId, databaseId, given?.name ?? receipt.name, message, receipt);
  });
}

/** Applies the pending tail of an ordered list whose head must match the ledger exactly. */
export async function applyMigrations(
  deps: Deps,
  actor: Actor,
  siteId: string,
  databaseId: string,
  migrations: Array<{ name: string; sql: string }>,
  source: MigrationSource = 'request',
) {
  await requireDatabase(deps, actor, siteId, databaseId, { activeSite: true });
  checkOrderedList(migrations);
  return withLease(deps, siteId, databaseId, async () => {
    const applied = await ledger(deps, siteId);
    checkLedgerHead(siteId, databaseId, applied, migrations, source);
    const pending = migrations.slice(applied.length);
    const appliedNames =
      source === 'deployment' ? await applyTogether(deps, siteId, pending) : await applyEach(deps, siteId, pending);
    return { appliedNames, nextAction: 'NONE', next: listReceipts(siteId, databaseId) };
  });
}

/**
 * Applies a deployment's migrations to a branch of its site's database (database-branches/), as its
 * publish would apply them to the database: the pending tail after the head the branch's ledger must
 * hold, all in one transaction with their receipts. No lease: only the branch's maker runs them.
 */
export async function applyToBranch(
  deps: Deps,
  branch: string,
  siteId: string,
  databaseId: string,
  migrations: Array<{ name: string; sql: string }>,
): Promise<string[]> {
  const applied = await ledger(deps, branch);
  checkLedgerHead(siteId, databaseId, applied, migrations, 'deployment');
  return applyTogether(deps, branch, migrations.slice(applied.length));
}
