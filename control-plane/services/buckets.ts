// Buckets: an account's collections of files, usable with or without a site.
import { notFound } from '../errors.ts';
import { requireOwnAccount } from './accounts.ts';
import { type Actor, type Deps, newId, timestamp } from '../deps.ts';
import { type PageRequest, paginate } from './pagination.ts';

export interface BucketRow {
  id: string;
  account_id: string;
  name: string;
  created_at: string;
  updated_at: string;
}

const BUCKET_COLUMNS = 'id, account_id, name, created_at, updated_at';

export interface Bucket {
  id: string;
  appAccountId: string;
  name: string;
  createdAt: string;
  updatedAt: string;
}

export const toBucket = (row: BucketRow): Bucket => ({
  id: row.id,
  appAccountId: row.account_id,
  name: row.name,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

/** The actor's bucket row; a bucket of another account is reported as not found. */
export async function requireBucket(deps: Pick<Deps, 'hotSql'>, actor: Actor, id: string): Promise<BucketRow> {
  const row = await deps.hotSql.get<BucketRow>(
    `SELECT ${BUCKET_COLUMNS} FROM buckets WHERE id = ? AND account_id = ?`,
    id,
    actor.accountId,
  );
  if (!row) throw notFound('bucket');
  return row;
}

/**
 * requireBucket for a file write, answered from memory once the bucket was found the actor's: a bucket
 * never moves to another account and is never deleted, so what was found stays true. (A write to a
 * bucket that were gone would still fail where it commits: its file row's foreign key.)
 */
export async function requireBucketForWrite(
  deps: Pick<Deps, 'hotSql' | 'hostingCache'>,
  actor: Actor,
  id: string,
): Promise<void> {
  if (deps.hostingCache.bucketAccount(id) === actor.accountId) return;
  await requireBucket(deps, actor, id);
  deps.hostingCache.rememberBucketAccount(id, actor.accountId);
}

export async function listBuckets(deps: Deps, actor: Actor, accountId: string, page: PageRequest) {
  await requireOwnAccount(deps, actor, accountId);
  const query = deps
    .db('buckets')
    .where({ account_id: accountId })
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ]);
  const { items, pagination } = await paginate(query, page, toBucket);
  return { buckets: items, pagination };
}

/** Inserts a bucket row; `db` may be a transaction so a site can create its bucket atomically. */
export async function insertBucket(deps: Deps, db: Deps['db'], accountId: string, name: string): Promise<BucketRow> {
  const now = timestamp(deps);
  const row: BucketRow = { id: newId(), account_id: accountId, name, created_at: now, updated_at: now };
  await db('buckets').insert(row);
  return row;
}

export async function createBucket(
  deps: Deps,
  actor: Actor,
  input: { accountId: string; name: string },
): Promise<Bucket> {
  await requireOwnAccount(deps, actor, input.accountId);
  return toBucket(await insertBucket(deps, deps.db, input.accountId, input.name));
}

export async function getBucket(deps: Deps, actor: Actor, id: string): Promise<Bucket> {
  return toBucket(await requireBucket(deps, actor, id));
}

export async function renameBucket(deps: Deps, actor: Actor, id: string, input: { name: string }): Promise<Bucket> {
  await requireBucket(deps, actor, id);
  await deps
    .db('buckets')
    .where({ id })
    .update({ name: input.name, updated_at: timestamp(deps) });
  return getBucket(deps, actor, id);
}
