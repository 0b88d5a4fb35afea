// Copies Berth's metadata from one database to another, either backend to either: an instance moving
// from SQLite to PostgreSQL (`berth admin copy-metadata`), a backup of PostgreSQL metadata taken as a
// SQLite file, and a restore into PostgreSQL. The target must be empty and at the same schema step as
// the source (both migrated by this Berth). The source is read in one snapshot, the target written one
// transaction per table in the order of their foreign keys, and then every table is compared: its row
// count and a checksum of its rows, read back from both.
import crypto from 'node:crypto';
import type { Knex } from 'knex';
import { BerthError } from '../errors.ts';

/** Every table of the schema, parents before children, with the columns that order its rows. */
export const TABLES: ReadonlyArray<{ name: string; key: readonly string[] }> = [
  { name: 'accounts', key: ['id'] },
  { name: 'users', key: ['id'] },
  { name: 'api_keys', key: ['id'] },
  { name: 'buckets', key: ['id'] },
  { name: 'sites', key: ['id'] },
  { name: 'site_domains', key: ['site_id', 'hostname'] },
  { name: 'deployments', key: ['id'] },
  { name: 'deployment_files', key: ['deployment_id', 'path'] },
  { name: 'deployment_uploads', key: ['deployment_id', 'sha256'] },
  { name: 'history_checkpoints', key: ['site_id', 'seq'] },
  { name: 'history_checkpoint_files', key: ['site_id', 'seq', 'path'] },
  { name: 'bucket_generations', key: ['bucket_id'] },
  { name: 'files', key: ['id'] },
  { name: 'file_versions', key: ['id'] },
  { name: 'account_blobs', key: ['account_id', 'blob_sha256'] },
  { name: 'builds', key: ['key'] },
  { name: 'npm_packages', key: ['name', 'version'] },
  { name: 'deployment_builds', key: ['deployment_id', 'sha256'] },
  { name: 'site_build_blobs', key: ['site_id', 'sha256'] },
  { name: 'functions', key: ['id'] },
  { name: 'function_logs', key: ['id'] },
  { name: 'site_analytics', key: ['id'] },
  { name: 'secrets', key: ['site_id', 'name'] },
  { name: 'secret_access_logs', key: ['id'] },
  { name: 'cron_runs', key: ['id'] },
  { name: 'llm_usage', key: ['account_id', 'day'] },
  { name: 'nodes', key: ['id'] },
  { name: 'databases', key: ['id'] },
  { name: 'database_replicas', key: ['site_id'] },
  { name: 'database_branches', key: ['site_id', 'branch'] },
  { name: 'migration_leases', key: ['database_id'] },
  { name: 'database_moves', key: ['site_id'] },
  { name: 'database_deletion_challenges', key: ['code'] },
  { name: 'database_exports', key: ['id'] },
  { name: 'memberships', key: ['account_id', 'user_id'] },
  { name: 'sessions', key: ['token_hash'] },
  { name: 'sign_in_links', key: ['token_hash'] },
  { name: 'site_tokens', key: ['token_hash'] },
  { name: 'site_sessions', key: ['token_hash'] },
  { name: 'invitations', key: ['id'] },
  { name: 'cli_logins', key: ['id'] },
  { name: 'attempt_limits', key: ['key'] },
  { name: 'tls_certificates', key: ['hostname'] },
  { name: 'tls_orders', key: ['hostname'] },
  { name: 'tls_challenges', key: ['token'] },
  { name: 'tls_accounts', key: ['directory_url'] },
  { name: 'preview_certificates', key: ['hostname'] },
];

/** Tables whose integer ids a sequence hands out on PostgreSQL: set past the copied ids. */
const SERIAL_TABLES = ['function_logs', 'secret_access_logs', 'site_analytics'];

const BATCH_ROWS = 500;

export interface TableCopy {
  table: string;
  rows: number;
  /** SHA-256 of the table's rows, the same read from source and target. */
  checksum: string;
}

const isPostgres = (db: Knex) => db.client.dialect === 'postgresql';

/** A row as both backends read it: booleans as 0/1 (SQLite has no other), keys in column order. */
function canonical(row: Record<string, unknown>): string {
  return JSON.stringify(
    Object.keys(row)
      .sort()
      .map((column) => {
        const value = row[column];
        return [
          column,
          typeof value === 'boolean' ? Number(value) : Buffer.isBuffer(value) ? value.toString('base64') : value,
        ];
      }),
  );
}

async function* rowsOf(
  db: Knex | Knex.Transaction,
  table: { name: string; key: readonly string[] },
): AsyncGenerator<Record<string, unknown>[]> {
  // Keyset pages: each page is read by the key after the last one, so a large table is never read whole.
  let after: Knex.Value[] | undefined;
  for (;;) {
    const query = db(table.name)
      .select('*')
      .orderBy(table.key.map((column) => ({ column })))
      .limit(BATCH_ROWS);
    if (after)
      query.whereRaw(`(${table.key.map(() => '??').join(', ')}) > (${table.key.map(() => '?').join(', ')})`, [
        ...table.key,
        ...after,
      ]);
    const rows = (await query) as Record<string, unknown>[];
    if (rows.length === 0) return;
    yield rows;
    if (rows.length < BATCH_ROWS) return;
    const last = rows.at(-1)!;
    after = table.key.map((column) => last[column] as Knex.Value);
  }
}

async function checksumOf(
  db: Knex | Knex.Transaction,
  table: { name: string; key: readonly string[] },
): Promise<{ rows: number; checksum: string }> {
  const hash = crypto.createHash('sha256');
  let rows = 0;
  for await (const page of rowsOf(db, table)) {
    for (const row of page) hash.update(`${canonical(row)}\n`);
    rows += page.length;
  }
  return { rows, checksum: hash.digest('hex') };
}

async function appliedMigrations(db: Knex | Knex.Transaction): Promise<string[]> {
  return ((await db('knex_migrations').orderBy('id').select('name')) as Array<{ name: string }>).map((row) => row.name);
}

/**
 * Runs `work` on a consistent view of `db`: a read-only REPEATABLE READ transaction on PostgreSQL (one
 * snapshot for every statement), a read transaction on SQLite (which reads one snapshot in WAL mode).
 */
export async function inSnapshot<T>(db: Knex, work: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  const trx = await db.transaction(isPostgres(db) ? { isolationLevel: 'repeatable read', readOnly: true } : undefined);
  try {
    return await work(trx);
  } finally {
    await trx.rollback();
  }
}

/** Throws unless `db` holds no Berth data (its schema may be there). */
export async function assertEmpty(db: Knex): Promise<void> {
  for (const table of TABLES) {
    const row = await db(table.name).first(db.raw('1 AS present'));
    if (row)
      throw new BerthError(
        'invalid_request',
        `the target already holds Berth data (table ${table.name} has rows): copy into an empty database only`,
      );
  }
}

/** Deletes every row a copy wrote (children first), in one transaction: what undoes a failed copy. */
export async function clearMetadata(db: Knex): Promise<void> {
  await db.transaction(async (trx) => {
    for (const table of [...TABLES].reverse()) await trx(table.name).del();
  });
}

/** Copies every table of `from` into the empty `to`; throws a BerthError when `to` is not empty or is at another schema step. */
export async function copyMetadata(from: Knex, to: Knex, onTable?: (copy: TableCopy) => void): Promise<TableCopy[]> {
  return inSnapshot(from, async (source) => {
    const [sourceSteps, targetSteps] = [await appliedMigrations(source), await appliedMigrations(to)];
    if (sourceSteps.join() !== targetSteps.join()) {
      throw new BerthError(
        'invalid_request',
        `the source metadata is at schema step ${sourceSteps.at(-1) ?? 'none'} and the target at ${targetSteps.at(-1) ?? 'none'}: start this Berth on the source once first, so that both are at ${targetSteps.at(-1)}`,
      );
    }
    await assertEmpty(to);

    const copies: TableCopy[] = [];
    for (const table of TABLES) {
      await to.transaction(async (target) => {
        for await (const page of rowsOf(source, table)) await target(table.name).insert(page);
        if (isPostgres(to) && SERIAL_TABLES.includes(table.name)) {
          await target.raw(
            `SELECT setval(pg_get_serial_sequence(?, 'id'), COALESCE((SELECT MAX(id) FROM ??), 0) + 1, false)`,
            [table.name, table.name],
          );
        }
      });
      const [wrote, read] = [await checksumOf(to, table), await checksumOf(source, table)];
      if (wrote.rows !== read.rows || wrote.checksum !== read.checksum) {
        throw new BerthError(
          'internal_error',
          `table ${table.name} did not copy faithfully: ${read.rows} rows read, ${wrote.rows} written, checksums ${read.checksum.slice(0, 12)} and ${wrote.checksum.slice(0, 12)}`,
        );
      }
      const copy = { table: table.name, ...read };
      copies.push(copy);
      onTable?.(copy);
    }
    return copies;
  });
}
