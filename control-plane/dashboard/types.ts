// The shapes of the API's answers the dashboard reads (control-plane/schemas.ts is the source of truth;
// GET /v0/openapi.json describes them all).

export interface Pagination {
  hasMore: boolean;
  nextOffset: number | null;
}

export interface SourceProblem {
  message: string;
  line: number;
  column: number;
}

export interface Site {
  id: string;
  name: string;
  subdomain: string;
  url: string;
  access: 'PUBLIC' | 'PRIVATE';
  status: 'ACTIVE' | 'ARCHIVED';
  bucketId: string;
  createdAt: string;
  updatedAt: string;
}

export interface SiteDetail extends Site {
  runtime: {
    status: 'NEVER_RECONCILED' | 'RECONCILED' | 'FAILED';
    lastRequestedAt: string | null;
    lastReconciledAt: string | null;
    functions: { total: number; ready: number; failed: Array<{ path: string; error: SourceProblem }> } | null;
  };
}

export interface FileRecord {
  id: string;
  bucketId: string;
  path: string;
  contentType: string;
  bytes: number;
  currentVersionId: string;
  createdAt: string;
  updatedAt: string;
}

export interface FileVersion {
  id: string;
  bytes: number;
  contentType: string;
  createdAt: string;
  restoredFromVersionId: string | null;
}

export interface FunctionRecord {
  id: string;
  path: string;
  name: string;
  kind: 'api' | 'cron';
  status: 'ACTIVE' | 'FAILED';
  schedule: string | null;
  nextRunAt: string | null;
  deployedVersionId: string | null;
  deployedAt: string | null;
  attemptedVersionId: string;
  lastError: SourceProblem | null;
  createdAt: string;
  updatedAt: string;
}

export interface LogLine {
  id: number;
  functionPath: string | null;
  requestId: string | null;
  level: 'debug' | 'info' | 'warn' | 'error';
  message: string;
  createdAt: string;
}

export interface CronRun {
  id: string;
  path: string;
  scheduledAt: string;
  startedAt: string | null;
  endedAt: string | null;
  outcome: 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'SKIPPED';
  error: string | null;
}

export interface SecretMetadata {
  name: string;
  updatedAt: string;
}

export interface SecretAccessLog {
  id: number;
  secretName: string;
  keyId: string;
  via: 'API' | 'CLI' | 'DASHBOARD';
  accessedAt: string;
  /** Set for reads by a signed-in user, when the server names them. */
  userEmail?: string | null;
  userId?: string | null;
}

export interface Database {
  id: string;
  status: 'PROVISIONING' | 'READY';
  sizeBytes: number;
  maxBytes: number;
  createdAt: string;
  updatedAt: string;
}

export interface QueryEnvelope {
  success: boolean;
  errors: Array<{ code: string; message: string }>;
  messages: string[];
  result: Array<{
    success: boolean;
    results: Array<Record<string, unknown>>;
    meta: { duration: number; changes: number; last_row_id: number | null };
  }>;
}

export interface MigrationReceipt {
  id: number;
  name: string;
  checksum: string;
  appliedAt: string;
  sourceAvailable: boolean;
}

export interface DatabaseExport {
  id: string;
  status: 'PROCESSING' | 'COMPLETE' | 'ERROR';
  createdAt: string;
  completedAt: string | null;
  bytes: number | null;
  error: string | null;
  downloadUrl?: string;
  downloadUrlExpiresAt?: string;
}

export interface RestorePoints {
  database: { id: string; status: string };
  /** The oldest and newest moment the database can be put back to; null until something was replicated. */
  earliest: string | null;
  latest: string | null;
  /** How its replication goes now; null while the database is not in use. */
  replication?: { lagMs: number; replicatedAt: string | null; replicaBytes: number } | null;
}

export interface DatabaseRestore {
  database: { id: string; status: string };
  restoredTo: string;
  /** The moment just before the restore: restoring to it undoes the restore. */
  restoredFrom: string;
}

export interface ApiKey {
  id: string;
  name: string | null;
  permission: 'READ' | 'WRITE';
  createdAt: string;
  revokedAt: string | null;
}

export interface Member {
  userId: string;
  email: string;
  role: 'ADMIN' | 'MEMBER';
  joinedAt: string;
}

export interface Invitation {
  id: string;
  email: string;
  role: 'ADMIN' | 'MEMBER';
  createdAt: string;
  expiresAt: string;
}

export interface CliLogin {
  code: string;
  machine: string;
  status: string;
  expiresAt: string;
}

export interface Domain {
  hostname: string;
  siteId: string;
  status: 'PENDING' | 'ACTIVE';
  verification: { type: 'TXT'; name: string; value: string };
  /** The site's own host: the name's CNAME points here (an apex name takes its A/AAAA records instead). */
  target: string;
  canonical: boolean;
  redirectSubdomain: boolean;
  createdAt: string;
  verifiedAt: string | null;
  checkedAt: string | null;
  failingSince: string | null;
  /** The name's certificate when Berth gets its own (BERTH_TLS=acme); absent with a proxy in front. */
  certificate?: {
    status: 'ISSUED' | 'NOT_YET' | 'FAILING';
    notAfter: string | null;
    renewAt: string | null;
    error: string | null;
    retryAt: string | null;
  };
}

export interface FileProblem extends SourceProblem {
  path: string;
}

export interface Deployment {
  id: string;
  shortId: string;
  siteId: string;
  kind: 'DEPLOY' | 'FILE' | 'PROMOTE' | 'RESTORE' | 'BASELINE';
  status: 'UPLOADING' | 'PUBLISHED' | 'FAILED';
  /** The newest change published: the site is what it made it. */
  current: boolean;
  prune: boolean;
  message: string | null;
  author: string;
  files: number;
  bytes: number;
  createdAt: string;
  publishedAt: string | null;
  sourceDeploymentId: string | null;
  restoredAt: string | null;
  errors: FileProblem[] | null;
  previewUrl: string;
}

export interface DeploymentDetail extends Deployment {
  missing: string[];
  /** What the deployment set at each path; a null sha256 removed the file. */
  fileList: Array<{
    path: string;
    sha256: string | null;
    bytes: number;
    contentType: string | null;
    versionId: string | null;
  }>;
  diff: { added: string[]; changed: string[]; removed: string[] };
}

export interface SnapshotFile {
  path: string;
  sha256: string;
  bytes: number;
  contentType: string;
  versionId: string;
}

export interface Snapshot {
  at: string;
  availableFrom: string;
  files: number;
  bytes: number;
}

export interface AnalyticsCounts {
  requests: number;
  status: { '2xx': number; '3xx': number; '4xx': number; '5xx': number };
  bytesOut: number;
  functionInvocations: number;
  functionErrors: number;
  coldStarts: number;
  databaseCalls: number;
  p50Ms: number | null;
  p95Ms: number | null;
  p99Ms: number | null;
  functionP50Ms: number | null;
  functionP95Ms: number | null;
  functionP99Ms: number | null;
}

export type AnalyticsPoint = AnalyticsCounts & { at: string };

export interface SiteAnalytics {
  from: string;
  to: string;
  step: 'minute' | 'hour' | 'day';
  totals: AnalyticsCounts;
  series: AnalyticsPoint[];
  topPaths: Array<{ path: string; requests: number }>;
  topReferrers: Array<{ host: string; requests: number }>;
}

export interface AccountAnalytics {
  from: string;
  to: string;
  step: 'minute' | 'hour' | 'day';
  totals: AnalyticsCounts;
  series: AnalyticsPoint[];
  sites: Array<{
    site: { id: string; name: string; subdomain: string };
    totals: AnalyticsCounts;
    series: AnalyticsPoint[];
  }>;
}
