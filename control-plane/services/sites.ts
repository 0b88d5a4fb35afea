// Sites: hosting attached to one bucket, served at its own subdomain.
import { BerthError, conflict } from '../errors.ts';
import { lockRows } from '../db/locks.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { SITE_CAPS, requireOwnAccount } from './accounts.ts';
import { type BucketRow, insertBucket, requireBucket, toBucket } from './buckets.ts';
import { type Actor, type Deps, newId, timestamp } from '../deps.ts';
import { type ReconcileReport, reconcileFunctions } from './functions.ts';
import { type PageRequest, paginate } from './pagination.ts';
import { type SiteAccess, type SiteRow, type SiteStatus, requireSite } from './site-rows.ts';
import { RESERVED_SUBDOMAINS, generateSubdomain, previewOf } from './subdomains.ts';
import { startHistory } from '../history/site-history.ts';

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
  /** RECONCILED when every source deployed, FAILED when some did not. */
  status: 'NEVER_RECONCILED' | 'RECONCILED' | 'FAILED';
  lastRequestedAt: string | null;
  lastReconciledAt: string | null;
  functions: ReconcileReport | null;
}

function runtimeStatus(row: SiteRow): RuntimeStatus {
  const report = row.reconcile_report ? (JSON.parse(row.reconcile_report) as ReconcileReport) : null;
  return {
    status: !row.reconciled_at ? 'NEVER_RECONCILED' : report && report.failed.length > 0 ? 'FAILED' : 'RECONCILED',
    lastRequestedAt: row.reconcile_requested_at,
    lastReconciledAt: row.reconciled_at,
    functions: report,
  };
}

/** Redeploys the site's runtime sources and records the outcome for get-site. */
async function reconcile(deps: Deps, site: SiteRow): Promise<void> {
  const requestedAt = timestamp(deps);
  await deps.db('sites').where({ id: site.id }).update({ reconcile_requested_at: requestedAt });
  const report = await reconcileFunctions(deps, site);
  await deps
    .db('sites')
    .where({ id: site.id })
    .update({ reconciled_at: timestamp(deps), reconcile_report: JSON.stringify(report) });
}

export interface SiteFilters {
  accountId: string;
  bucketId?: string | undefined;
  subdomain?: string | undefined;
  status?: SiteStatus | undefined;
}

export async function listSites(deps: Deps, actor: Actor, filters: SiteFilters, page: PageRequest) {
  await requireOwnAccount(deps, actor, filters.accountId);
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

export async function createSite(deps: Deps, actor: Actor, input: CreateSiteInput): Promise<Site> {
  const account = await requireOwnAccount(deps, actor, input.accountId);
  if (input.subdomain !== undefined && RESERVED_SUBDOMAINS.has(input.subdomain)) {
    throw conflict('subdomain_reserved', `subdomain "${input.subdomain}" is reserved`);
  }
  if (input.subdomain !== undefined && previewOf(input.subdomain)) {
    throw conflict(
      'subdomain_reserved',
      `subdomain "${input.subdomain}" reads as a preview host (<deployment>--<subdomain>): choose another`,
    );
  }
  if (input.bucketId !== undefined) await requireBucket(deps, actor, input.bucketId);

  // Up to a few attempts only matter for generated subdomains, whose random suffix may collide.
  for (let attempt = 0; ; attempt++) {
    const subdomain = input.subdomain ?? generateSubdomain(input.name);
    try {
      const row = await deps.db.transaction(async (trx) => {
        // The account's site creations take turns (on any server): each counts the sites before it.
        await lockRows(trx, 'accounts', { id: account.id });
        const cap = SITE_CAPS[account.plan];
        if (cap !== null) {
          const { count } = (await trx('sites').where({ account_id: account.id }).count({ count: '*' }).first()) as {
            count: number;
          };
          if (count >= cap) {
            throw new BerthError('site_limit_reached', `the ${account.plan} plan allows ${cap} sites per account`);
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
          reconcile_report: null,
          created_at: now,
          updated_at: now,
        };
        try {
          await trx('sites').insert(site);
        } catch (err) {
          // Another account's site took the subdomain after the check above.
          if (isUniqueViolation(err)) throw conflict('subdomain_taken', `subdomain "${subdomain}" is already taken`);
          throw err;
        }
        await startHistory(trx, site, now);
        return site;
      });
      await deps.changes.publish({ kind: 'sites', siteId: row.id });
      // An existing bucket may already hold function sources: deploy them for the new site.
      if (input.bucketId !== undefined) await reconcile(deps, row);
      return toSite(deps, row);
    } catch (err) {
      const generatedCollision =
        input.subdomain === undefined && err instanceof BerthError && err.code === 'subdomain_taken';
      if (generatedCollision && attempt < 5) continue;
      throw err;
    }
  }
}

export async function getSite(deps: Deps, actor: Actor, id: string) {
  const row = await requireSite(deps, actor, id);
  const bucket = await requireBucket(deps, actor, row.bucket_id);
  return { ...toSite(deps, row), bucket: toBucket(bucket), runtime: runtimeStatus(row) };
}

export interface UpdateSiteInput {
  name?: string | undefined;
  access?: SiteAccess | undefined;
  status?: SiteStatus | undefined;
  reconcile?: true | undefined;
}

export async function updateSite(deps: Deps, actor: Actor, id: string, input: UpdateSiteInput) {
  const row = await requireSite(deps, actor, id);
  const status = input.status ?? row.status;
  if (input.reconcile && status !== 'ACTIVE') {
    throw conflict('site_not_active', 'an archived site must be activated before its runtime can be reconciled');
  }
  const now = timestamp(deps);
  const changes: Partial<SiteRow> = { updated_at: now };
  if (input.name !== undefined) changes.name = input.name;
  if (input.access !== undefined) changes.access = input.access;
  if (input.status !== undefined) changes.status = input.status;
  await deps.db('sites').where({ id }).update(changes);
  await deps.changes.publish({ kind: 'sites', siteId: id });
  if (input.reconcile) await reconcile(deps, await requireSite(deps, actor, id));
  return getSite(deps, actor, id);
}
