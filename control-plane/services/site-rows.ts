// Site rows as other services need them, without depending on the sites service itself.
import { notFound } from '../errors.ts';
import type { Actor, Deps } from './deps.ts';

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
  /** JSON ReconcileReport of the last reconciliation. */
  reconcile_report: string | null;
  created_at: string;
  updated_at: string;
}

export async function requireSite(deps: Deps, actor: Actor, id: string): Promise<SiteRow> {
  const row = await deps.db<SiteRow>('sites').where({ id, account_id: actor.accountId }).first();
  if (!row) throw notFound('site');
  return row;
}

/** The site attached to a bucket, if any. */
export async function siteOfBucket(deps: Deps, bucketId: string): Promise<SiteRow | undefined> {
  return deps.db<SiteRow>('sites').where({ bucket_id: bucketId }).first();
}
