// Site rows as other services need them, without depending on the sites service itself.
import { notFound } from '../errors.ts';
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
