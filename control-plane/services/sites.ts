// Sites: hosting attached to one bucket, served at its own subdomain.
import { BerthError, conflict, notFound } from '../errors.ts';
import { SITE_CAPS, requireOwnAccount } from './accounts.ts';
import { type BucketRow, insertBucket, requireBucket, toBucket } from './buckets.ts';
import { type Caller, type Deps, newId, timestamp } from './deps.ts';
import { type PageRequest, paginate } from './pagination.ts';
import { RESERVED_SUBDOMAINS, generateSubdomain } from './subdomains.ts';

export type SiteAccess = 'PUBLIC' | 'PRIVATE';
export type SiteStatus = 'ACTIVE' | 'ARCHIVED';

export interface SiteRow {
  id: string;
  account_id: string;
  bucket_id: string;
  name: string;
  subdomain: string;
  access: SiteAccess;
  status: SiteStatus;
  reconcile_requested_at: string | null;
  reconciled_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface Site {
  id: string;
  appAccountId: string;
  name: string;
  subdomain: string;
  url: string;
  access: SiteAccess;
  status: SiteStatus;
  bucketId: string;
  createdAt: string;
  updatedAt: string;
}

export const toSite = (deps: Deps, row: SiteRow): Site => ({
  id: row.id,
  appAccountId: row.account_id,
  name: row.name,
  subdomain: row.subdomain,
  url: deps.siteUrl(row.subdomain),
  access: row.access,
  status: row.status,
  bucketId: row.bucket_id,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

/** The runtime reconciliation report of get-site. */
export interface RuntimeStatus {
  status: 'NEVER_RECONCILED' | 'RECONCILED';
  lastRequestedAt: string | null;
  lastReconciledAt: string | null;
}

const runtimeStatus = (row: SiteRow): RuntimeStatus => ({
  status: row.reconciled_at ? 'RECONCILED' : 'NEVER_RECONCILED',
  lastRequestedAt: row.reconcile_requested_at,
  lastReconciledAt: row.reconciled_at,
});

export async function requireSite(deps: Deps, caller: Caller, id: string): Promise<SiteRow> {
  const row = await deps.db<SiteRow>('sites').where({ id, account_id: caller.accountId }).first();
  if (!row) throw notFound('site');
  return row;
}

export interface SiteFilters {
  accountId: string;
  bucketId?: string | undefined;
  subdomain?: string | undefined;
  status?: SiteStatus | undefined;
}

export async function listSites(deps: Deps, caller: Caller, filters: SiteFilters, page: PageRequest) {
  await requireOwnAccount(deps, caller, filters.accountId);
  const query = deps.db('sites').where({ account_id: filters.accountId });
  if (filters.bucketId !== undefined) query.andWhere({ bucket_id: filters.bucketId });
  if (filters.subdomain !== undefined) query.andWhere({ subdomain: filters.subdomain });
  if (filters.status !== undefined) query.andWhere({ status: filters.status });
  query.orderBy([
    { column: 'updated_at', order: 'desc' },
    { column: 'id', order: 'desc' },
  ]);
  const { items, pagination } = await paginate(query, page, (row: SiteRow) => toSite(deps, row));
  return { sites: items, pagination };
}

export interface CreateSiteInput {
  accountId: string;
  name: string;
  subdomain?: string | undefined;
  access?: SiteAccess | undefined;
  bucketId?: string | undefined;
}

export async function createSite(deps: Deps, caller: Caller, input: CreateSiteInput): Promise<Site> {
  const account = await requireOwnAccount(deps, caller, input.accountId);
  if (input.subdomain !== undefined && RESERVED_SUBDOMAINS.has(input.subdomain)) {
    throw conflict('subdomain_reserved', `subdomain "${input.subdomain}" is reserved`);
  }
  if (input.bucketId !== undefined) await requireBucket(deps, caller, input.bucketId);

  // Up to a few attempts only matter for generated subdomains, whose random suffix may collide.
  for (let attempt = 0; ; attempt++) {
    const subdomain = input.subdomain ?? generateSubdomain(input.name);
    try {
      const row = await deps.db.transaction(async (trx) => {
        const cap = SITE_CAPS[account.plan];
        if (cap !== null) {
          const { count } = (await trx('sites').where({ account_id: account.id }).count({ count: '*' }).first()) as { count: number };
          if (count >= cap) {
            throw new BerthError('site_limit_reached', 422, `the ${account.plan} plan allows ${cap} sites per account`);
          }
        }
        if (await trx('sites').where({ subdomain }).first('id')) {
          throw conflict('subdomain_taken', `subdomain "${subdomain}" is already taken`);
        }
        let bucket: BucketRow;
        if (input.bucketId !== undefined) {
          if (await trx('sites').where({ bucket_id: input.bucketId }).first('id')) {
            throw conflict('bucket_has_site', 'this bucket already has a site; a bucket supports one site');
          }
          bucket = (await trx<BucketRow>('buckets').where({ id: input.bucketId }).first())!;
        } else {
          bucket = await insertBucket(deps, trx, account.id, input.name);
        }
        const now = timestamp(deps);
        const site: SiteRow = {
          id: newId(),
          account_id: account.id,
          bucket_id: bucket.id,
          name: input.name,
          subdomain,
          access: input.access ?? 'PUBLIC',
          status: 'ACTIVE',
          reconcile_requested_at: null,
          reconciled_at: null,
          created_at: now,
          updated_at: now,
        };
        await trx('sites').insert(site);
        return site;
      });
      deps.hostingCache.forgetSites();
      return toSite(deps, row);
    } catch (err) {
      const generatedCollision = input.subdomain === undefined && err instanceof BerthError && err.code === 'subdomain_taken';
      if (generatedCollision && attempt < 5) continue;
      throw err;
    }
  }
}

export async function getSite(deps: Deps, caller: Caller, id: string) {
  const row = await requireSite(deps, caller, id);
  const bucket = await requireBucket(deps, caller, row.bucket_id);
  return { ...toSite(deps, row), bucket: toBucket(bucket), runtime: runtimeStatus(row) };
}

export interface UpdateSiteInput {
  name?: string | undefined;
  access?: SiteAccess | undefined;
  status?: SiteStatus | undefined;
  reconcile?: true | undefined;
}

export async function updateSite(deps: Deps, caller: Caller, id: string, input: UpdateSiteInput) {
  const row = await requireSite(deps, caller, id);
  const status = input.status ?? row.status;
  if (input.reconcile && status !== 'ACTIVE') {
    throw conflict('site_not_active', 'an archived site must be activated before its runtime can be reconciled');
  }
  const now = timestamp(deps);
  const changes: Partial<SiteRow> = { updated_at: now };
  if (input.name !== undefined) changes.name = input.name;
  if (input.access !== undefined) changes.access = input.access;
  if (input.status !== undefined) changes.status = input.status;
  if (input.reconcile) {
    // No runtime sources exist yet, so a requested reconciliation completes at once.
    changes.reconcile_requested_at = now;
    changes.reconciled_at = now;
  }
  await deps.db('sites').where({ id }).update(changes);
  deps.hostingCache.forgetSites();
  return getSite(deps, caller, id);
}
