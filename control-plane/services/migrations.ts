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
import { requireDatabase } from './databases.ts';
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

async function ledger(deps: Deps, siteId: string): Promise<ReceiptRow[]> {
  return (
    await deps.siteDatabases.run(
      siteId,
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

/** Applies one migration: its SQL and receipt in one transaction. */
async function applyOne(deps: Deps, siteId: string, name: string, sql: string): Promise<void> {
  try {
    await deps.siteDatabases.migrate(siteId, sql, {
      sql: `INSERT INTO ${LEDGER_TABLE} (name, checksum, sql, applied_at) VALUES (?, ?, ?, ?)`,
      params: [name, checksum(sql), sql, appliedAt(deps.now())],
    });
  } catch (err) {
    if (!(err instanceof StatementError)) throw err;
    if (err.reason === 'busy' || err.reason === 'unavailable')
      throw new BerthError('database_unavailable', err.message);
    throw new BerthError(
      'migration_failed',
      `${name} failed and was rolled back; no receipt was written: ${err.message}`,
      {
        failedName: name,
        providerMessage: err.message,
        recovery: 'fix the SQL and apply it under a name that has never been applied',
      },
    );
  }
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

/** Applies the pending tail of an ordered list whose head must match the ledger exactly. */
export async function applyMigrations(
  deps: Deps,
  actor: Actor,
  siteId: string,
  databaseId: string,
  migrations: Array<{ name: string; sql: string }>,
) {
  await requireDatabase(deps, actor, siteId, databaseId, { activeSite: true });
  checkOrderedList(migrations);
  return withLease(deps, siteId, databaseId, async () => {
    const applied = await ledger(deps, siteId);
    applied.forEach((receipt, i) => {
      const given = migrations[i];
      if (!given) {
        throw historyConflict(
          siteId,
          databaseId,
          receipt.name,
          `the database has ${receipt.name} applied, which the list does not include: send the whole ordered history`,
          receipt,
        );
      }
      if (given.name !== receipt.name || checksum(given.sql) !== receipt.checksum) {
        throw historyConflict(
          siteId,
          databaseId,
          given.name,
          `the list disagrees with the database at position ${i + 1}: ${receipt.name} is applied there`,
          receipt,
        );
      }
    });
    const appliedNames: string[] = [];
    for (const migration of migrations.slice(applied.length)) {
      try {
        await applyOne(deps, siteId, migration.name, migration.sql);
      } catch (err) {
        if (err instanceof BerthError && err.details) err.details.appliedNames = appliedNames;
        throw err;
      }
      appliedNames.push(migration.name);
    }
    return { appliedNames, nextAction: 'NONE', next: listReceipts(siteId, databaseId) };
  });
}

/**
 * The migrations a deployment carries, applied before its switch: the same exact-prefix rule as
 * applyMigrations, and every pending one in one transaction with its receipts, so a failure leaves the
 * database as it was. Returns the names applied.
 */
export async function applyDeploymentMigrations(
  deps: Deps,
  actor: Actor,
  siteId: string,
  migrations: Array<{ name: string; sql: string }>,
): Promise<string[]> {
  const database = await deps.db('databases').where({ site_id: siteId }).first('id');
  if (!database)
    throw new BerthError(
      'database_not_ready',
      'the deployment carries migrations but the site has no database: create it first (POST /v0/sites/:siteId/databases)',
    );
  const databaseId = database.id as string;
  await requireDatabase(deps, actor, siteId, databaseId, { activeSite: true });
  checkOrderedList(migrations);
  return withLease(deps, siteId, databaseId, async () => {
    const applied = await ledger(deps, siteId);
    applied.forEach((receipt, i) => {
      const given = migrations[i];
      if (!given || given.name !== receipt.name || checksum(given.sql) !== receipt.checksum)
        throw historyConflict(
          siteId,
          databaseId,
          given?.name ?? receipt.name,
          `the deployment's migrations disagree with the database at position ${i + 1}: ${receipt.name} is applied there`,
          receipt,
        );
    });
    const pending = migrations.slice(applied.length);
    if (pending.length === 0) return [];
    const at = appliedAt(deps.now());
    try {
      // The scripts one after the other, each ended, and one statement writing all their receipts.
      await deps.siteDatabases.migrate(siteId, pending.map((m) => `${m.sql}\n;\n`).join(''), {
        sql: `INSERT INTO ${LEDGER_TABLE} (name, checksum, sql, applied_at) VALUES ${pending.map(() => '(?, ?, ?, ?)').join(', ')}`,
        params: pending.flatMap((m) => [m.name, checksum(m.sql), m.sql, at]),
      });
    } catch (err) {
      if (!(err instanceof StatementError)) throw err;
      if (err.reason === 'busy' || err.reason === 'unavailable')
        throw new BerthError('database_unavailable', err.message);
      const which = pending.length === 1 ? pending[0]!.name : `one of ${pending.map((m) => m.name).join(', ')}`;
      throw new BerthError('migration_failed', `${which} failed and everything was rolled back: ${err.message}`, {
        failedName: pending.length === 1 ? pending[0]!.name : null,
        providerMessage: err.message,
      });
    }
    return pending.map((m) => m.name);
  });
}
