// Input and resource schemas shared by every front door: REST validates with them and the OpenAPI
// document is generated from them, so the two cannot drift apart. The dashboard takes its types from
// here too (`import type`, erased from its bundle), so this module imports nothing but zod and plain data.
import { z } from 'zod';
import { PLANS } from './services/plans.ts';

export const Name = z
  .string({ error: 'must be a string' })
  .trim()
  .min(1, { error: 'must be 1–100 characters after trimming' })
  .max(100, { error: 'must be 1–100 characters after trimming' });

export const Uuid = z.uuid({ error: 'must be a UUID' });

export const Subdomain = z
  .string({ error: 'must be a string' })
  .min(3, { error: 'must be 3–63 characters' })
  .max(63, { error: 'must be 3–63 characters' })
  .regex(/^[a-z0-9](?:[a-z0-9-]{1,61})[a-z0-9]$/, {
    error: 'must be lowercase letters, digits and hyphens, starting and ending with a letter or digit',
  });

export const Access = z.enum(['PUBLIC', 'PRIVATE'], { error: 'must be PUBLIC or PRIVATE' });
export const SiteStatus = z.enum(['ACTIVE', 'ARCHIVED'], { error: 'must be ACTIVE or ARCHIVED' });
export const Plan = z.enum(PLANS);
export const Timestamp = z.iso.datetime();

/** A page parameter: a decimal string in a REST query, a number from JSON front doors. */
const queryInt = (min: number, max: number, fallback: number) =>
  z
    .union(
      [
        z.number(),
        z
          .string()
          .regex(/^\d+$/, { error: `must be an integer from ${min} to ${max}` })
          .transform(Number),
      ],
      {
        error: `must be an integer from ${min} to ${max}`,
      },
    )
    .pipe(
      z
        .number()
        .int({ error: `must be an integer from ${min} to ${max}` })
        .min(min, { error: `must be at least ${min}` })
        .max(max, { error: `must be at most ${max}` }),
    )
    .optional()
    .transform((v) => v ?? fallback);

export const PageQuery = z.object({
  limit: queryInt(1, 200, 50).describe('page size, 1–200 (default 50)'),
  offset: queryInt(0, Number.MAX_SAFE_INTEGER, 0).describe('rows to skip (default 0)'),
});

export const Pagination = z.object({ hasMore: z.boolean(), nextOffset: z.number().int().nullable() });

export const ErrorEnvelope = z.object({
  error: z.object({ code: z.string(), message: z.string(), details: z.record(z.string(), z.unknown()).optional() }),
});

export const Account = z.object({ id: Uuid, name: z.string(), plan: Plan, createdAt: Timestamp, updatedAt: Timestamp });

export const Bucket = z.object({
  id: Uuid,
  appAccountId: Uuid,
  name: z.string(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const Site = z.object({
  id: Uuid,
  appAccountId: Uuid,
  name: z.string(),
  subdomain: z.string(),
  url: z.string().describe('where the site is served'),
  access: Access,
  status: SiteStatus,
  bucketId: Uuid,
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const SourceProblem = z.object({
  message: z.string(),
  line: z.number().int().describe('1-based; 0 when the problem is the path'),
  column: z.number().int(),
});

export const SiteDetail = Site.extend({
  bucket: Bucket,
  runtime: z
    .object({
      status: z.enum(['NEVER_RECONCILED', 'RECONCILED', 'FAILED']),
      lastRequestedAt: Timestamp.nullable(),
      lastReconciledAt: Timestamp.nullable(),
      functions: z
        .object({
          total: z.number().int(),
          ready: z.number().int(),
          failed: z.array(z.object({ path: z.string(), error: SourceProblem })),
        })
        .nullable(),
    })
    .describe('runtime reconciliation status'),
});

export const FunctionRecord = z.object({
  id: Uuid,
  path: z.string(),
  name: z.string(),
  kind: z.enum(['api', 'cron']).describe('api/<name>.ts endpoint or cron/<name>.ts job'),
  status: z.enum(['ACTIVE', 'FAILED']),
  schedule: z.string().nullable().describe('cron jobs: the deployed 5-field UTC schedule'),
  nextRunAt: Timestamp.nullable().describe('cron jobs: when the schedule fires next'),
  deployedVersionId: Uuid.nullable().describe('the file version being served'),
  deployedAt: Timestamp.nullable(),
  attemptedVersionId: Uuid.describe('the newest version a deployment was attempted for'),
  lastError: SourceProblem.nullable(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const Deployment = z.object({
  siteId: Uuid,
  sourcePath: z.string(),
  status: z.enum(['READY', 'FAILED']),
  functionId: Uuid.optional(),
  error: SourceProblem.optional(),
});

export const FunctionLogLine = z.object({
  id: z.number().int(),
  functionPath: z.string().nullable(),
  requestId: z.string().nullable(),
  level: z.enum(['debug', 'info', 'warn', 'error']),
  message: z.string(),
  createdAt: Timestamp,
});

/** Which log lines a list or a live stream gives: every filter given must match. */
export const LogFilterQuery = z.object({
  function: z.string().min(1).max(300).optional().describe('only lines of this function, by path (api/hello.ts)'),
  level: FunctionLogLine.shape.level.optional().describe('only lines of this level'),
  q: z.string().min(1).max(200).optional().describe('only lines whose message holds this text (any case)'),
});

/** Where a live log stream starts: after this line id (a reconnecting client's Last-Event-ID wins). */
export const LogStreamQuery = LogFilterQuery.extend({
  since: z
    .string()
    .regex(/^\d{1,15}$/, { error: 'must be a line id' })
    .transform(Number)
    .optional()
    .describe('send the stored lines after this id first (default: only lines stored from now on)'),
});

export const DeployFunctionBody = z
  .object({ path: z.string().describe('stored source path, e.g. api/hello.ts') })
  .strict();

export const FileRecord = z.object({
  id: Uuid,
  bucketId: Uuid,
  path: z.string(),
  contentType: z.string(),
  bytes: z.number().int(),
  currentVersionId: Uuid,
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const FileVersion = z.object({
  id: Uuid,
  bytes: z.number().int(),
  contentType: z.string(),
  createdAt: Timestamp,
  restoredFromVersionId: Uuid.nullable(),
});

export const WriteFileResult = z.object({
  id: Uuid,
  fileId: Uuid,
  bucketId: Uuid,
  path: z.string(),
  contentType: z.string(),
  bytes: z.number().int(),
  versionId: Uuid,
  deployment: Deployment.optional().describe('present when the write changed runtime source; check its status'),
});

// Path parameters shared by several resources' routes.
export const SiteParams = z.object({ siteId: Uuid });
export const BucketParams = z.object({ bucketId: Uuid });

// Request bodies and queries.
export const UpdateAccountBody = z.object({ name: Name }).strict();
export const ListByAccountQuery = PageQuery.extend({ accountId: Uuid });
export const CreateBucketBody = z.object({ accountId: Uuid, name: Name }).strict();
export const RenameBucketBody = z.object({ name: Name }).strict();
export const ListSitesQuery = ListByAccountQuery.extend({
  bucketId: Uuid.optional(),
  subdomain: z.string().optional(),
  status: SiteStatus.optional(),
});
export const CreateSiteBody = z
  .object({
    accountId: Uuid,
    name: Name,
    subdomain: Subdomain.optional(),
    access: Access.optional(),
    bucketId: Uuid.optional(),
  })
  .strict();
export const UpdateSiteBody = z
  .object({
    name: Name.optional(),
    access: Access.optional(),
    status: SiteStatus.optional(),
    reconcile: z.literal(true, { error: 'must be the literal true' }).optional(),
  })
  .strict();
export const ListFilesQuery = PageQuery.extend({
  path: z.string().optional().describe('exact normalized path'),
  prefix: z.string().optional().describe('normalized path prefix, e.g. "web/"'),
});
export const RestoreBody = z
  .object({
    versionId: Uuid.describe('the version whose bytes become current again'),
    currentVersionId: Uuid.nullable().describe('the version the caller believes is current (null for a deleted file)'),
  })
  .strict();

export const Hostname = z
  .string({ error: 'a hostname is required' })
  .describe('a public DNS name such as shop.example.com or www.example.org; Unicode names are stored as punycode');
export const DomainRecord = z.object({
  hostname: z.string(),
  siteId: Uuid,
  status: z.enum(['PENDING', 'ACTIVE']).describe('ACTIVE once its TXT record was seen: then it is served'),
  verification: z
    .object({ type: z.literal('TXT'), name: z.string(), value: z.string() })
    .describe('the DNS record that proves the name is yours: create it, then verify'),
  target: z
    .string()
    .describe('where the name should point: a CNAME to this host, or for an apex the same A/AAAA records it has'),
  canonical: z.boolean().describe('the site’s other names answer 308 to this one'),
  redirectSubdomain: z.boolean().describe('the site’s subdomain answers 308 to this one too'),
  createdAt: Timestamp,
  verifiedAt: Timestamp.nullable(),
  checkedAt: Timestamp.nullable().describe('when the TXT record was last looked for'),
  failingSince: Timestamp.nullable().describe('when the TXT record was first found missing; null while it is there'),
  certificate: z
    .object({
      status: z
        .enum(['ISSUED', 'NOT_YET', 'FAILING'])
        .describe('NOT_YET: ordered at the first HTTPS visit once the domain is ACTIVE'),
      notAfter: Timestamp.nullable(),
      renewAt: Timestamp.nullable(),
      error: z.string().nullable().describe('the CA’s last answer when ordering failed'),
      retryAt: Timestamp.nullable(),
    })
    .optional()
    .describe('only when Berth gets its own certificates (BERTH_TLS=acme)'),
});
export const AddDomainBody = z.object({ hostname: Hostname }).strict();
export const UpdateDomainBody = z
  .object({
    canonical: z.boolean().optional(),
    redirectSubdomain: z.boolean().optional().describe('only with canonical: the subdomain redirects as well'),
  })
  .strict();

const FileProblem = z.object({
  path: z.string(),
  message: z.string(),
  line: z.number().int().describe('1-based; 0 when the problem is not at a place in the file'),
  column: z.number().int(),
});
export const DeploymentRecord = z.object({
  id: Uuid,
  shortId: z.string().describe('names the preview host: <shortId>--<subdomain>.<site host>'),
  siteId: Uuid,
  kind: z.enum(['DEPLOY', 'FILE', 'PROMOTE', 'RESTORE', 'BASELINE']),
  status: z.enum(['UPLOADING', 'PUBLISHED', 'FAILED']),
  seq: z.number().int().nullable().describe('its place in the site’s history once published: later is larger'),
  current: z.boolean().describe('the newest change published: the site is what it made it'),
  prune: z.boolean(),
  message: z.string().nullable(),
  author: z.string().describe('the key, user or CLI login that made it'),
  files: z.number().int(),
  bytes: z.number().int(),
  createdAt: Timestamp,
  publishedAt: Timestamp.nullable(),
  sourceDeploymentId: Uuid.nullable().describe('PROMOTE: the deployment made current again'),
  restoredAt: Timestamp.nullable().describe('RESTORE: the instant the site was put back to'),
  errors: z.array(FileProblem).nullable(),
  appliedMigrations: z
    .array(z.string())
    .nullable()
    .describe('the site database migrations it applied (they stay applied when its switch then failed)'),
  previewUrl: z.string(),
  previewAccess: z
    .enum(['PRIVATE', 'PUBLIC'])
    .describe('who its preview host answers: PRIVATE, the account’s signed-in members; PUBLIC, as the live site does'),
  previewSecrets: z.boolean().describe('whether its preview’s functions are given the site’s secrets'),
  databaseRestore: z
    .object({ restoredTo: z.string(), restoredFrom: z.string() })
    .nullable()
    .describe(
      'a whole restore’s database restore: the second it went back to, and the moment just before (restoring the site whole to restoredFrom undoes both)',
    ),
  purgedFiles: z.number().int().describe('its files whose versions were deleted for good since: they are gone from it'),
});
const DeploymentFileEntry = z.object({
  path: z.string(),
  sha256: z.string().nullable().describe('null: the deployment removed the file'),
  bytes: z.number().int(),
  contentType: z.string().nullable(),
  versionId: Uuid.nullable(),
  purged: z.boolean().describe('its version was deleted for good: the deployment no longer holds the file'),
});
const LockedPackage = z.object({
  name: z.string(),
  version: z.string(),
  integrity: z.string().nullable(),
});
export const DatabaseBranch = z.object({
  branch: z.string().describe('its id: the deployment’s, or an instant’s (t<unix ms>)'),
  status: z
    .enum(['MAKING', 'READY', 'FAILED'])
    .describe('FAILED: the deployment’s migrations failed on it (`error`), and it holds nothing'),
  madeFrom: z
    .enum(['history', 'copy'])
    .nullable()
    .describe('history: the database as it was at `asOf`, from its replica; copy: as it was when the branch was made'),
  asOf: Timestamp.nullable(),
  bytes: z.number().int().describe('what it takes, counted against the account’s storage'),
  error: z.string().nullable(),
  createdAt: Timestamp,
  usedAt: Timestamp,
});
export const DeploymentDetail = DeploymentRecord.extend({
  missing: z.array(z.string()).describe('digests still to upload (UPLOADING)'),
  databaseBranch: DatabaseBranch.nullable().describe(
    'the branch of the site’s database its preview’s functions use, once made (an uploading deployment’s: it ends with it)',
  ),
  fileList: z.array(DeploymentFileEntry),
  packages: z
    .array(LockedPackage)
    .describe('the npm packages its functions are built with: what the site’s deno.lock pins after it'),
  diff: z.object({
    added: z.array(z.string()),
    changed: z.array(z.string()),
    removed: z.array(z.string()),
    packages: z
      .object({
        added: z.array(LockedPackage),
        removed: z.array(LockedPackage),
        changed: z.array(z.object({ name: z.string(), from: z.array(z.string()), to: z.array(z.string()) })),
      })
      .describe('the npm packages its deno.lock adds, removes and moves to other versions'),
  }),
});
export const CreateDeploymentBody = z
  .object({
    files: z
      .array(
        z
          .object({
            path: z.string(),
            sha256: z.string().optional().describe('the bytes’ SHA-256, lowercase hex'),
            size: z.number().int().optional(),
            contentType: z.string().optional(),
            content: z
              .string()
              .optional()
              .describe('the file’s UTF-8 text, instead of sha256 and size (up to 256 KiB)'),
          })
          .strict(),
      )
      .describe('the whole set: web/, api/ and cron/ files, and any other but data/'),
    prune: z
      .boolean()
      .optional()
      .describe('remove the site’s web/, api/, cron/ and lib/ files, deno.json and deno.lock, that the set lacks'),
    message: z.string().optional(),
    migrations: z
      .array(z.object({ name: z.string(), sql: z.string() }).strict())
      .optional()
      .describe(
        'the site database’s whole ordered migration history: the ones not applied yet are applied before the switch, all or none',
      ),
  })
  .strict();
export const UpdateDeploymentBody = z
  .object({
    previewAccess: z
      .enum(['PRIVATE', 'PUBLIC'])
      .optional()
      .describe(
        'PUBLIC lets anyone open the preview host as they may the live site; PRIVATE (the default) only members',
      ),
    previewSecrets: z.boolean().optional().describe('give the preview’s functions the site’s secrets (off by default)'),
  })
  .strict();
export const RestoreSiteBody = z
  .object({
    at: z.string().describe('an RFC 3339 time'),
    database: z
      .boolean()
      .optional()
      .describe(
        'true: the site’s database too, to the same second, recorded with the deployment (undone by restoring the site whole to its databaseRestore.restoredFrom)',
      ),
  })
  .strict();
export const DatabaseSnapshot = z.object({
  at: z.string().describe('the second the database would be restored to'),
  restorable: z.boolean(),
  reason: z.string().nullable().describe('why it is not restorable to that second'),
  availableFrom: z
    .string()
    .nullable()
    .describe('the earliest moment both the files’ and the database’s histories hold'),
  tables: z
    .array(z.object({ name: z.string(), rowsThen: z.number().int().nullable(), rowsNow: z.number().int().nullable() }))
    .describe(
      'each table’s rows at that second (from the instant’s branch of the database) and now; null: no such table then, or now',
    ),
});
export const SiteSnapshot = z.object({
  at: z.string(),
  availableFrom: z.string(),
  files: z.number().int(),
  bytes: z.number().int(),
  previewUrl: z.string().describe('the instant’s preview host, serving the site as it was then'),
  database: DatabaseSnapshot.optional().describe('with database=true: what a whole restore would do to the database'),
});
export const SnapshotFile = z.object({
  path: z.string(),
  sha256: z.string(),
  bytes: z.number().int(),
  contentType: z.string(),
  versionId: Uuid,
});

export const SecretName = z.string().describe('1–128 letters, digits and underscores, not starting with a digit');
export const SecretMetadata = z.object({ name: z.string(), updatedAt: Timestamp });
export const SetSecretBody = z
  .object({ name: SecretName, value: z.string({ error: 'must be a string' }).describe('1–65,536 bytes of UTF-8') })
  .strict();
export const ReplaceSecretBody = z
  .object({ value: z.string({ error: 'must be a string' }).describe('1–65,536 bytes of UTF-8') })
  .strict();
export const SecretAccessLog = z.object({
  id: z.number().int(),
  secretName: z.string(),
  keyId: z.string().describe('the API key that read the value, or user:<userId> for a signed-in user'),
  via: z.enum(['API', 'CLI', 'DASHBOARD']),
  accessedAt: Timestamp,
  userEmail: z.string().optional().describe('the signed-in user who read it'),
});

export const CronRun = z.object({
  id: Uuid,
  path: z.string(),
  scheduledAt: Timestamp,
  startedAt: Timestamp.nullable(),
  endedAt: Timestamp.nullable(),
  outcome: z.enum(['RUNNING', 'SUCCEEDED', 'FAILED', 'SKIPPED']),
  error: z.string().nullable(),
});
export const ListCronRunsQuery = PageQuery.extend({
  path: z.string().optional().describe('only runs of this cron/<name>.ts'),
});

export const Database = z.object({
  id: Uuid,
  status: z.enum(['PROVISIONING', 'READY']),
  sizeBytes: z.number().int().describe('space the database takes on disk now'),
  maxBytes: z.number().int().describe('size it may grow to; writes past it fail with database_full'),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
export const DatabaseParams = z.object({ siteId: Uuid, databaseId: Uuid });
export const QueryBody = z
  .object({
    sql: z
      .string({ error: 'sql must be a string' })
      .min(1, { error: 'sql must not be empty' })
      .describe('exactly one SQL statement; use ? placeholders'),
    params: z
      .array(z.union([z.string(), z.number(), z.boolean(), z.null()]), {
        error: 'params must be a list of strings, numbers, booleans or nulls',
      })
      .optional(),
    readOnly: z
      .boolean({ error: 'readOnly must be true or false' })
      .optional()
      .describe(
        'true: the statement may only read (SELECT, or WITH … SELECT), and SQLite refuses writes while it runs; anything else fails with statement_not_allowed and changes nothing',
      ),
    branch: z
      .string()
      .regex(/^(?:[0-9a-f-]{36}|t\d{13})$/, { error: 'branch must be a deployment’s id or an instant, t<unix ms>' })
      .optional()
      .describe(
        'run it on a preview’s branch of the database instead: an uploading deployment’s id, or an instant’s t<unix ms>; made first when it is not yet',
      ),
  })
  .strict();
export const QueryEnvelope = z.object({
  success: z.boolean(),
  errors: z.array(z.object({ code: z.string(), message: z.string() })),
  messages: z.array(z.string()),
  result: z.array(
    z.object({
      success: z.boolean(),
      results: z.array(z.record(z.string(), z.unknown())),
      meta: z.object({
        duration: z.number().describe('ms'),
        changes: z.number().int(),
        last_row_id: z.number().int().nullable(),
      }),
    }),
  ),
});

const Confirm = z.literal(true, { error: 'confirm must be the literal true' });
const MigrationInput = z.object({
  name: z.string().describe('<NNNN>_<description>.sql, e.g. 0001_create_notes.sql'),
  sql: z.string().min(1, { error: 'sql must not be empty' }),
});
export const ApplyMigrationBody = MigrationInput.extend({ confirm: Confirm }).strict();
export const ApplyMigrationsBody = z
  .object({
    migrations: z
      .array(MigrationInput.strict())
      .min(1, { error: 'migrations must list at least one migration' })
      .describe('the whole ordered history, applied ones first'),
    confirm: Confirm,
  })
  .strict();
export const MigrationReceipt = z.object({
  id: z.number().int(),
  name: z.string(),
  checksum: z.string().describe('SHA-256 of the SQL, hex'),
  appliedAt: z.string().describe('YYYY-MM-DD HH:MM:SS (UTC)'),
  sourceAvailable: z.boolean(),
});
export const MigrationParams = z.object({ siteId: Uuid, databaseId: Uuid, migrationName: z.string() });

/** What to do next: an operation and its input. REST renders it as `nextCommand`, "METHOD /path {body}". */
export const NextStep = z.object({ operation: z.string(), input: z.record(z.string(), z.unknown()) });

export const DeletionChallenge = z.object({
  confirmationCode: z.string().describe('DELETE-XXXXXXXX'),
  expiresAt: Timestamp,
  next: NextStep,
});
export const DeleteDatabaseBody = z
  .object({ confirmationCode: z.string({ error: 'confirmationCode is required' }) })
  .strict();
export const DatabaseExport = z.object({
  id: Uuid,
  status: z.enum(['PROCESSING', 'COMPLETE', 'ERROR']),
  createdAt: Timestamp,
  completedAt: Timestamp.nullable(),
  bytes: z.number().int().nullable(),
  error: z.string().nullable(),
  download: z
    .object({ token: z.string(), expiresAt: Timestamp })
    .optional()
    .describe('COMPLETE only: the query of a signed download link that needs no API key and expires'),
});
/** An export as REST answers it: its download token turned into a link at the address the client used. */
export const RestDatabaseExport = DatabaseExport.omit({ download: true }).extend({
  downloadUrl: z.string().optional().describe('COMPLETE only: a signed link that needs no API key and expires'),
  downloadUrlExpiresAt: Timestamp.optional(),
});
export const ExportParams = z.object({ siteId: Uuid, databaseId: Uuid, exportId: Uuid });
const DatabaseState = z.object({ id: Uuid, status: z.string() });
export const RestorePoints = z.object({
  database: DatabaseState,
  earliest: Timestamp.nullable().describe(
    'the oldest restorable moment: the retention’s start, or later when the replica holds less (a young database, or older history dropped to keep the replica within replicaMaxBytes)',
  ),
  latest: Timestamp.nullable(),
  replication: z
    .object({
      lagMs: z.number(),
      replicatedAt: Timestamp.nullable(),
      replicaBytes: z.number(),
      replicaMaxBytes: z
        .number()
        .describe(
          'the bytes the replica may take: past them its oldest history is dropped, and earliest moves forward',
        ),
    })
    .nullable()
    .optional(),
});
export const DatabaseRestore = z.object({ database: DatabaseState, restoredTo: Timestamp, restoredFrom: Timestamp });

// Answers of single operations that the dashboard reads too.
export const MigrationDetail = z.object({
  name: z.string(),
  checksum: z.string(),
  sourceAvailable: z.boolean(),
  sql: z.string().optional(),
});
export const DatabaseCompaction = z.object({
  databaseId: Uuid,
  bytesBefore: z.number().int(),
  bytesAfter: z.number().int(),
});
export const FileVersionsPage = z.object({
  fileId: Uuid,
  currentVersionId: Uuid.nullable(),
  versions: z.array(FileVersion),
  pagination: Pagination,
});
export const VersionDeletion = z.object({
  deleted: z.literal(true),
  fileId: Uuid,
  versionId: Uuid,
  freedBytes: z.number().int(),
  purgedFromDeployments: z
    .number()
    .int()
    .describe('the site’s deployments that held this version: they no longer have the file, nor their previews'),
});
export const SecretValue = z.object({ name: z.string(), value: z.string() });

// Analytics (control-plane/analytics/, services/analytics.ts).
export const AnalyticsStep = z.enum(['minute', 'hour', 'day']);
export const AnalyticsQuery = z
  .object({
    from: z.string().optional().describe('RFC 3339; default: 24 hours before `to`'),
    to: z.string().optional().describe('RFC 3339; default: now'),
    step: AnalyticsStep.optional().describe('default: minute up to 6 hours, hour up to 14 days, day beyond'),
  })
  .strict();
const Milliseconds = z.number().nullable().describe('null: nothing was measured');
export const AnalyticsCounts = z.object({
  requests: z.number().int(),
  status: z.object({
    '2xx': z.number().int(),
    '3xx': z.number().int(),
    '4xx': z.number().int(),
    '5xx': z.number().int(),
  }),
  bytesOut: z.number().int(),
  functionInvocations: z.number().int(),
  functionErrors: z.number().int().describe('calls that threw, timed out, ran out of memory or crashed'),
  coldStarts: z.number().int(),
  databaseCalls: z.number().int().describe('ctx.db calls of the site’s functions'),
  p50Ms: Milliseconds.describe('request latency percentiles, to the answer’s head (within 19%)'),
  p95Ms: Milliseconds,
  p99Ms: Milliseconds,
  functionP50Ms: Milliseconds.describe('function call latency percentiles'),
  functionP95Ms: Milliseconds,
  functionP99Ms: Milliseconds,
});
export const AnalyticsPoint = AnalyticsCounts.extend({ at: Timestamp.describe('the start of the step') });
const AnalyticsRange = z.object({
  from: Timestamp.describe('the first step’s start'),
  to: Timestamp.describe('the last step’s end'),
  step: AnalyticsStep,
});
export const SiteAnalytics = AnalyticsRange.extend({
  totals: AnalyticsCounts,
  series: z.array(AnalyticsPoint).describe('one point per step, empty steps included'),
  topPaths: z.array(z.object({ path: z.string(), requests: z.number().int() })),
  topReferrers: z.array(z.object({ host: z.string(), requests: z.number().int() })),
});
export const AccountAnalytics = AnalyticsRange.extend({
  totals: AnalyticsCounts,
  series: z.array(AnalyticsPoint),
  sites: z
    .array(
      z.object({
        site: z.object({ id: Uuid, name: z.string(), subdomain: z.string() }),
        totals: AnalyticsCounts,
        series: z.array(AnalyticsPoint),
      }),
    )
    .describe('every site of the account, busiest first'),
});

// People: API keys, members, invitations and CLI logins (operations/people.ts), and the account's usage.
export const Permission = z.enum(['READ', 'WRITE'], { error: 'must be READ or WRITE' });
export const Role = z.enum(['ADMIN', 'MEMBER'], { error: 'must be ADMIN or MEMBER' });
export const ApiKey = z.object({
  id: Uuid,
  name: z.string().nullable(),
  permission: Permission,
  createdAt: Timestamp,
  revokedAt: Timestamp.nullable(),
});
/** A key just made: its secret is in this answer only. */
export const NewApiKey = z.object({ key: ApiKey, secret: z.string() });
export const Member = z.object({ userId: Uuid, email: z.string(), role: Role, joinedAt: Timestamp });
export const Invitation = z.object({
  id: Uuid,
  email: z.string(),
  role: Role,
  invitedBy: Uuid,
  createdAt: Timestamp,
  expiresAt: Timestamp,
});
export const NewInvitation = z.object({
  invitation: Invitation,
  path: z.string().describe('the link’s path on this host; shown this once only'),
});
/** A new invitation as REST answers it: its link at the address the client used. */
export const RestNewInvitation = NewInvitation.extend({ url: z.string().describe('the single-use link') });
export const CliLogin = z.object({
  code: z.string(),
  machine: z.string(),
  status: z.enum(['PENDING', 'APPROVED', 'COLLECTED', 'EXPIRED']),
  createdAt: Timestamp,
  expiresAt: Timestamp,
});
export const AccountUsage = z.object({
  day: z.string(),
  modelCalls: z.number().int(),
  allowance: z.number().int(),
  storage: z.object({
    usedBytes: z.number().int(),
    limitBytes: z.number().int().nullable().describe('null: no limit'),
    databaseReplicaBytes: z
      .number()
      .int()
      .describe(
        'what the replicas of its site databases take (their history for time travel and recovery), as last measured; each is bounded on its own, outside the limit',
      ),
    databaseBranchBytes: z
      .number()
      .int()
      .describe(
        'what its previews’ branches of site databases take, as last measured: a branch is made only while these and its files leave room for it under the limit',
      ),
  }),
});
