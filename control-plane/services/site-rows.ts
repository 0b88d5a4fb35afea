// Site rows, and their databases' rows, as other services need them, without depending on the sites or
// databases service itself.
import { conflict, notFound } from '../errors.ts';
import type { Actor, Deps } from '../deps.ts';
import { SITE_COLUMNS, type SiteRow } from '../db/site-row.ts';

export type { SiteAccess, SiteRow, SiteStatus } from '../db/site-row.ts';

export async function requireSite(deps: Pick<Deps, 'hotSql'>, actor: Actor, id: string): Promise<SiteRow> {
  const row = await deps.hotSql.get<SiteRow>(
    `SELECT ${SITE_COLUMNS} FROM sites WHERE id = ? AND account_id = ?`,
    id,
    actor.accountId,
  );
  if (!row) throw notFound('site');
  return row;
}

/** The site attached to a bucket, if any. */
export async function siteOfBucket(deps: Pick<Deps, 'hotSql'>, bucketId: string): Promise<SiteRow | undefined> {
  return deps.hotSql.get<SiteRow>(`SELECT ${SITE_COLUMNS} FROM sites WHERE bucket_id = ?`, bucketId);
}

export interface DatabaseRow {
  id: string;
  site_id: string;
  status: 'PROVISIONING' | 'READY';
  /** The node whose data dir holds the database; null for one made before nodes were recorded. */
  node_id: string | null;
  created_at: string;
  updated_at: string;
}

/** The actor's ready database of a site; `activeSite` also requires the site to be active. */
export async function requireDatabase(
  deps: Pick<Deps, 'hotSql'>,
  actor: Actor,
  siteId: string,
  databaseId: string,
  options: { activeSite?: boolean } = {},
): Promise<DatabaseRow> {
  const site = await requireSite(deps, actor, siteId);
  if (options.activeSite && site.status !== 'ACTIVE')
    throw conflict('site_not_active', 'an archived site must be activated before migrations are applied');
  const row = await deps.hotSql.get<DatabaseRow>(
    'SELECT id, site_id, status, node_id, created_at, updated_at FROM databases WHERE id = ? AND site_id = ?',
    databaseId,
    siteId,
  );
  if (!row) throw notFound('database');
  if (row.status !== 'READY')
    throw conflict('database_not_ready', 'the database is still being created; repeat the create request to finish it');
  return row;
}
