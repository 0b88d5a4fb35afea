// A row of the sites table, as services and the hosting cache read it.

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

/** SiteRow's columns, for statements that name them (hot statements never select *). */
export const SITE_COLUMNS =
  'id, account_id, bucket_id, name, subdomain, access, status, reconcile_requested_at, reconciled_at, reconcile_report, created_at, updated_at';
