// How many bytes an account stores, and how many it may. Usage counts each blob the account references
// once, however many references it has: each file version, and each upload of a deployment not yet
// published. The `account_blobs` rows (`versions` counts the references) and
// `accounts.storage_used_bytes` change in the same transaction as the references themselves (see
// chargeVersion, releaseVersion and releaseUploads), so the count is never off and a quota check is one
// row read. A deployment's uploads are charged as they arrive, given back when it fails, is cancelled or
// expires, and handed to its versions when it publishes: the versions are charged first, in the same
// transaction, so bytes the account keeps are never counted twice nor let go in between.
//
// Uploads in flight are not in the metadata yet: each holds a reservation of the bytes it has read so
// far, and a write is refused once committed and reserved bytes together would pass the limit. So
// concurrent uploads to one server cannot together store more than the account has left, even as
// blobs nobody ends up referencing. Reservations are the server's own: servers sharing the metadata
// each admit uploads on their own, and what holds the limit among them is the commit, whose check in
// chargeVersion refuses, with the same quota_exceeded, bytes the others' commits left no room for.
import { BerthError, notFound } from '../errors.ts';
import { formatBytes } from '../format-bytes.ts';
import type { Config } from '../config.ts';
import { type HotSql, type HotTx, type Param, type Statement, type StatementResult, statement } from '../db/hot-sql.ts';
import type { Plan } from './plans.ts';
import type { Store } from '../deps.ts';

declare module '../deps.ts' {
  interface Deps {
    /** What each account's files hold against its limit, uploads in flight included. */
    storageQuota: StorageQuota;
  }
}

/** Plans whose accounts store without a limit, like their sites. */
const UNLIMITED_PLANS: ReadonlySet<Plan> = new Set(['platform-admin']);

interface QuotaRow {
  plan: Plan;
  storage_used_bytes: number;
  storage_limit_bytes: number | null;
}

export interface StorageUsage {
  usedBytes: number;
  /** null: no limit. */
  limitBytes: number | null;
}

const ACCOUNT_QUOTA = 'SELECT plan, storage_used_bytes, storage_limit_bytes FROM accounts WHERE id = ?';

/** The limit of an account: the operator's own for it, or its plan's. */
export function storageLimit(
  config: Pick<Config, 'accountStorageBytes'>,
  row: Pick<QuotaRow, 'plan' | 'storage_limit_bytes'>,
): number | null {
  if (row.storage_limit_bytes !== null) return row.storage_limit_bytes;
  return UNLIMITED_PLANS.has(row.plan) ? null : config.accountStorageBytes;
}

export function quotaExceeded(usage: { usedBytes: number; limitBytes: number }, neededBytes: number): BerthError {
  return new BerthError(
    'quota_exceeded',
    `this account stores ${formatBytes(usage.usedBytes)} of its ${formatBytes(usage.limitBytes)} limit, and the write needs ${formatBytes(neededBytes)} more: ` +
      'delete old file versions (DELETE /v0/files/:fileId/versions) or files to free space, or ask the operator for a higher limit',
    { usedBytes: usage.usedBytes, limitBytes: usage.limitBytes, neededBytes },
  );
}

/** What a statement compares usage with for an account without a limit. */
const NO_LIMIT = Number.MAX_SAFE_INTEGER;

/** The limit a statement reads from an account's row: storageLimit's rule, NO_LIMIT for none. */
function limitOfRow(config: Pick<Config, 'accountStorageBytes'>): { sql: string; params: Param[] } {
  const unlimited = [...UNLIMITED_PLANS];
  return {
    sql: `CASE WHEN storage_limit_bytes IS NOT NULL THEN storage_limit_bytes WHEN plan IN (${unlimited.map(() => '?').join(', ')}) THEN ? ELSE ? END`,
    params: [...unlimited, NO_LIMIT, config.accountStorageBytes],
  };
}

/**
 * The statements that count a new version of `sha256` against the account, for a batch of the
 * transaction that inserts it (see chargeVersion, and checkCharge for what their answers mean).
 */
export function chargeStatements(
  config: Pick<Config, 'accountStorageBytes'>,
  accountId: string,
  sha256: string,
  bytes: number,
): { held: Statement; charged: Statement } {
  const limit = limitOfRow(config);
  return {
    held: statement(
      'INSERT INTO account_blobs (account_id, blob_sha256, bytes, versions) VALUES (?, ?, ?, 1) ON CONFLICT (account_id, blob_sha256) DO UPDATE SET versions = account_blobs.versions + 1 RETURNING versions',
      accountId,
      sha256,
      bytes,
    ),
    // Only the blob's first version adds its bytes, and only within the limit, checked on the row as
    // the statement holds it.
    charged: statement(
      `UPDATE accounts SET storage_used_bytes = storage_used_bytes + ? WHERE id = ? AND (SELECT versions FROM account_blobs WHERE account_id = ? AND blob_sha256 = ?) = 1 AND storage_used_bytes + ? <= ${limit.sql}`,
      bytes,
      accountId,
      accountId,
      sha256,
      bytes,
      ...limit.params,
    ),
  };
}

/** Throws quota_exceeded when chargeStatements found the blob new to the account and no room for it. */
export async function checkCharge(
  sql: HotTx,
  config: Pick<Config, 'accountStorageBytes'>,
  accountId: string,
  bytes: number,
  answers: { held: StatementResult; charged: StatementResult },
): Promise<void> {
  const held = answers.held.rows[0] as { versions: number };
  if (held.versions > 1 || answers.charged.changes > 0) return;
  const account = (await sql.get<QuotaRow>(ACCOUNT_QUOTA, accountId))!;
  throw quotaExceeded(
    { usedBytes: account.storage_used_bytes, limitBytes: storageLimit(config, account) ?? NO_LIMIT },
    bytes,
  );
}

/**
 * Counts a new version of `sha256` against the account, inside the transaction that inserts it: a blob
 * the account already references costs nothing; a new one is refused past the limit. Writers of one
 * blob take turns on its `account_blobs` row, so only the first counts its bytes. Writers of new blobs
 * take turns on the account's row, which the one statement that adds their bytes locks until the
 * commit and which checks the limit itself: two cannot both fit in the last free space. Call it last
 * before the commit (or send it with the transaction's last statements it waits for), so that the
 * account's writes wait on each other as briefly as can be. Locks are taken in one order everywhere (a
 * file, a blob of the account, the account), so writers never deadlock.
 */
export async function chargeVersion(
  sql: HotTx,
  config: Pick<Config, 'accountStorageBytes'>,
  accountId: string,
  sha256: string,
  bytes: number,
): Promise<void> {
  const answers = await sql.batch(chargeStatements(config, accountId, sha256, bytes));
  await checkCharge(sql, config, accountId, bytes, answers);
}

/** Uncounts a deleted version, inside the transaction that deletes it; returns the bytes it freed. */
export async function releaseVersion(sql: HotTx, accountId: string, sha256: string): Promise<number> {
  const row = await sql.get<{ bytes: number; versions: number }>(
    'UPDATE account_blobs SET versions = versions - 1 WHERE account_id = ? AND blob_sha256 = ? RETURNING bytes, versions',
    accountId,
    sha256,
  );
  if (!row || row.versions > 0) return 0;
  await sql.run('DELETE FROM account_blobs WHERE account_id = ? AND blob_sha256 = ?', accountId, sha256);
  await sql.run('UPDATE accounts SET storage_used_bytes = storage_used_bytes - ? WHERE id = ?', row.bytes, accountId);
  return row.bytes;
}

/**
 * Gives back what a deployment's uploads hold, inside the transaction that publishes, fails, cancels
 * or expires it (which holds the deployment's row, so no upload of it commits meanwhile), and deletes
 * the upload rows: the sweeper may then remove bytes nothing else references. A publish has charged
 * its versions first, so the blobs they keep stay counted. Returns the bytes freed.
 */
export async function releaseUploads(sql: HotTx, accountId: string, deploymentId: string): Promise<number> {
  const { changes } = await sql.run(
    'UPDATE account_blobs SET versions = versions - 1 WHERE account_id = ? AND blob_sha256 IN (SELECT sha256 FROM deployment_uploads WHERE deployment_id = ?)',
    accountId,
    deploymentId,
  );
  if (changes === 0) return 0;
  await sql.run('DELETE FROM deployment_uploads WHERE deployment_id = ?', deploymentId);
  const freed = await sql.all<{ bytes: number | string }>(
    'DELETE FROM account_blobs WHERE account_id = ? AND versions = 0 RETURNING bytes',
    accountId,
  );
  const bytes = freed.reduce((sum, row) => sum + Number(row.bytes), 0);
  if (bytes > 0)
    await sql.run('UPDATE accounts SET storage_used_bytes = storage_used_bytes - ? WHERE id = ?', bytes, accountId);
  return bytes;
}

/**
 * The operator's limit for one account (`null`: its plan's again); answers what it stores and may store.
 * A lower limit than what is stored refuses new bytes and keeps everything stored.
 */
export async function setStorageLimit(
  store: Store,
  config: Pick<Config, 'accountStorageBytes'>,
  accountId: string,
  limitBytes: number | null,
): Promise<StorageUsage> {
  const changed = await store.db('accounts').where({ id: accountId }).update({ storage_limit_bytes: limitBytes });
  if (changed === 0) throw notFound('account');
  const row = (await store
    .db('accounts')
    .where({ id: accountId })
    .first('plan', 'storage_used_bytes', 'storage_limit_bytes')) as QuotaRow;
  return { usedBytes: Number(row.storage_used_bytes), limitBytes: storageLimit(config, row) };
}

/**
 * The bytes the replicas of the account's site databases take, as the nodes replicating them last
 * measured them (outside the storage limit: a replica is bounded on its own, BERTH_DATABASE_REPLICA_MAX_BYTES).
 */
export async function databaseReplicaBytes(store: Pick<Store, 'db'>, accountId: string): Promise<number> {
  const row = (await store
    .db('database_replicas')
    .join('databases', 'databases.site_id', 'database_replicas.site_id')
    .join('sites', 'sites.id', 'databases.site_id')
    .where('sites.account_id', accountId)
    .sum({ bytes: 'database_replicas.bytes' })
    .first()) as { bytes: number | string | null } | undefined;
  return Number(row?.bytes ?? 0);
}

/** Every account's usage, for the metrics. */
export async function storageByAccount(store: Pick<Store, 'db'>, config: Pick<Config, 'accountStorageBytes'>) {
  const rows = (await store
    .db('accounts')
    .orderBy('id')
    .select('id', 'plan', 'storage_used_bytes', 'storage_limit_bytes')) as Array<QuotaRow & { id: string }>;
  return rows.map((row) => ({
    accountId: row.id,
    usedBytes: Number(row.storage_used_bytes),
    limitBytes: storageLimit(config, row),
  }));
}

/** Bytes held by uploads in flight, per account; see the file's header. */
export class StorageQuota {
  readonly #reserved = new Map<string, number>();
  /**
   * Each account's usage as last read, while it has uploads in flight: read again once one of them
   * ends, since what it reserved may now be committed.
   */
  readonly #usage = new Map<string, StorageUsage>();

  constructor(
    readonly config: Pick<Config, 'accountStorageBytes'>,
    readonly hotSql: Pick<HotSql, 'get'>,
  ) {}

  /** What the account's versions hold now, and its limit. */
  async usage(accountId: string): Promise<StorageUsage> {
    const row = await this.hotSql.get<QuotaRow>(ACCOUNT_QUOTA, accountId);
    if (!row) return { usedBytes: 0, limitBytes: this.config.accountStorageBytes };
    return { usedBytes: row.storage_used_bytes, limitBytes: storageLimit(this.config, row) };
  }

  /** A reservation for one upload of the account; release it whatever happens to the upload. */
  reserve(accountId: string): Reservation {
    return new Reservation(this, accountId);
  }

  /** Adds `bytes` to the account's reservations, or throws quota_exceeded if they would not fit. */
  async take(accountId: string, bytes: number): Promise<void> {
    let usage = this.#usage.get(accountId);
    if (!usage) {
      usage = await this.usage(accountId);
      this.#usage.set(accountId, usage);
    }
    const reserved = this.#reserved.get(accountId) ?? 0;
    if (usage.limitBytes !== null && usage.usedBytes + reserved + bytes > usage.limitBytes) {
      throw quotaExceeded({ usedBytes: usage.usedBytes + reserved, limitBytes: usage.limitBytes }, bytes);
    }
    this.#reserved.set(accountId, reserved + bytes);
  }

  give(accountId: string, bytes: number): void {
    this.#usage.delete(accountId);
    const left = (this.#reserved.get(accountId) ?? 0) - bytes;
    if (left > 0) this.#reserved.set(accountId, left);
    else this.#reserved.delete(accountId);
  }
}

export class Reservation {
  #held = 0;

  constructor(
    readonly quota: StorageQuota,
    readonly accountId: string,
  ) {}

  async take(bytes: number): Promise<void> {
    await this.quota.take(this.accountId, bytes);
    this.#held += bytes;
  }

  release(): void {
    this.quota.give(this.accountId, this.#held);
    this.#held = 0;
  }
}
