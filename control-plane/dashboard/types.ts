// The shapes of the API's answers the dashboard reads, inferred from the server's own schemas
// (control-plane/schemas.ts), so a change on the server that the dashboard does not follow fails its
// type-check. `import type` only: esbuild erases it, and no zod reaches the bundle.
// Hand-written elsewhere, having no schema on the server: the /session answer (api.ts) and the rows
// of SQLite's own catalogue the table browser reads (database-browser.ts).
import type { z } from 'zod';
import type * as schemas from '../schemas.ts';

type Of<T extends z.ZodType> = z.output<T>;

export type Pagination = Of<typeof schemas.Pagination>;
export type SourceProblem = Of<typeof schemas.SourceProblem>;

export type Site = Of<typeof schemas.Site>;
export type SiteDetail = Of<typeof schemas.SiteDetail>;

export type FileRecord = Of<typeof schemas.FileRecord>;
export type FileVersion = Of<typeof schemas.FileVersion>;
export type WriteFileResult = Of<typeof schemas.WriteFileResult>;

export type Deployment = Of<typeof schemas.DeploymentRecord>;
export type DeploymentDetail = Of<typeof schemas.DeploymentDetail>;
export type FileProblem = NonNullable<Deployment['errors']>[number];
export type Snapshot = Of<typeof schemas.SiteSnapshot>;
export type SnapshotFile = Of<typeof schemas.SnapshotFile>;

export type FunctionRecord = Of<typeof schemas.FunctionRecord>;
export type LogLine = Of<typeof schemas.FunctionLogLine>;
export type CronRun = Of<typeof schemas.CronRun>;

export type SecretMetadata = Of<typeof schemas.SecretMetadata>;
export type SecretAccessLog = Of<typeof schemas.SecretAccessLog>;

export type Database = Of<typeof schemas.Database>;
export type QueryEnvelope = Of<typeof schemas.QueryEnvelope>;
export type MigrationReceipt = Of<typeof schemas.MigrationReceipt>;
export type DatabaseExport = Of<typeof schemas.RestDatabaseExport>;
export type DeletionChallenge = Of<typeof schemas.DeletionChallenge>;
export type RestorePoints = Of<typeof schemas.RestorePoints>;
export type DatabaseRestore = Of<typeof schemas.DatabaseRestore>;

export type Domain = Of<typeof schemas.DomainRecord>;

export type ApiKey = Of<typeof schemas.ApiKey>;
export type Member = Of<typeof schemas.Member>;
export type Invitation = Of<typeof schemas.Invitation>;
export type NewInvitation = Of<typeof schemas.RestNewInvitation>;
export type CliLogin = Of<typeof schemas.CliLogin>;
export type AccountUsage = Of<typeof schemas.AccountUsage>;

export type AnalyticsCounts = Of<typeof schemas.AnalyticsCounts>;
export type AnalyticsPoint = Of<typeof schemas.AnalyticsPoint>;
export type SiteAnalytics = Of<typeof schemas.SiteAnalytics>;
export type AccountAnalytics = Of<typeof schemas.AccountAnalytics>;

export type MigrationDetail = Of<typeof schemas.MigrationDetail>;
export type DatabaseCompaction = Of<typeof schemas.DatabaseCompaction>;
export type FileVersionsPage = Of<typeof schemas.FileVersionsPage>;
export type VersionDeletion = Of<typeof schemas.VersionDeletion>;
export type SecretValue = Of<typeof schemas.SecretValue>;
export type NewApiKey = Of<typeof schemas.NewApiKey>;
