// Metadata schema migrations, passed to Knex as an explicit ordered list (never a folder scan). One
// set serves SQLite and PostgreSQL, written with Knex's schema builder and SQL both engines run. Types
// keep one meaning on both: paths and other text a user writes are `text` (a `string` is varchar(255)
// on PostgreSQL), byte sizes and counters that may pass 2^31 are `bigInteger`, timestamps are ISO 8601
// UTC strings (which sort as time does), booleans are `boolean`. The first migrations said varchar and
// integer where these rules say text and bigint; they were corrected in place, which changes nothing
// for SQLite (its column affinities are the same) and gives PostgreSQL the right types from the start.
import type { Knex } from 'knex';
import * as initial from './migrations/0001_initial.ts';
import * as functions from './migrations/0002_functions.ts';
import * as secrets from './migrations/0003_secrets.ts';
import * as cron from './migrations/0004_cron.ts';
import * as llmUsage from './migrations/0005_llm_usage.ts';
import * as databases from './migrations/0006_databases.ts';
import * as migrationLeases from './migrations/0007_migration_leases.ts';
import * as databaseLifecycle from './migrations/0008_database_lifecycle.ts';
import * as users from './migrations/0009_users.ts';
import * as sessions from './migrations/0010_sessions.ts';
import * as signInLinks from './migrations/0011_sign_in_links.ts';
import * as siteSessions from './migrations/0012_site_sessions.ts';
import * as invitations from './migrations/0013_invitations.ts';
import * as cliLogins from './migrations/0014_cli_logins.ts';
import * as storageQuota from './migrations/0015_storage_quota.ts';
import * as attemptLimits from './migrations/0016_attempt_limits.ts';
import * as nodeOwnership from './migrations/0017_node_ownership.ts';
import * as nodes from './migrations/0018_nodes.ts';
import * as databaseMoves from './migrations/0019_database_moves.ts';
import * as databaseCopies from './migrations/0020_database_copies.ts';
import * as siteDomains from './migrations/0021_site_domains.ts';
import * as tls from './migrations/0022_tls.ts';
import * as deployments from './migrations/0023_deployments.ts';
import * as dropDatabaseCopies from './migrations/0024_drop_database_copies.ts';
import * as nodeReplication from './migrations/0025_node_replication.ts';
import * as siteAnalytics from './migrations/0026_site_analytics.ts';
import * as sitePast from './migrations/0027_site_past.ts';
import * as deploymentUploadCharges from './migrations/0028_deployment_upload_charges.ts';
import * as databaseReplicaBytes from './migrations/0029_database_replica_bytes.ts';
import * as deploymentAppliedMigrations from './migrations/0030_deployment_applied_migrations.ts';
import * as siteAnalyticsHours from './migrations/0031_site_analytics_hours.ts';
import * as previewCertificates from './migrations/0032_preview_certificates.ts';
import * as builds from './migrations/0033_builds.ts';
import * as buildCharges from './migrations/0034_build_charges.ts';
import * as databaseBranches from './migrations/0035_database_branches.ts';
import * as deploymentDatabaseRestore from './migrations/0036_deployment_database_restore.ts';

interface Migration {
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

const migrations: Record<string, Migration> = {
  '0001_initial': initial,
  '0002_functions': functions,
  '0003_secrets': secrets,
  '0004_cron': cron,
  '0005_llm_usage': llmUsage,
  '0006_databases': databases,
  '0007_migration_leases': migrationLeases,
  '0008_database_lifecycle': databaseLifecycle,
  '0009_users': users,
  '0010_sessions': sessions,
  '0011_sign_in_links': signInLinks,
  '0012_site_sessions': siteSessions,
  '0013_invitations': invitations,
  '0014_cli_logins': cliLogins,
  '0015_storage_quota': storageQuota,
  '0016_attempt_limits': attemptLimits,
  '0017_node_ownership': nodeOwnership,
  '0018_nodes': nodes,
  '0019_database_moves': databaseMoves,
  '0020_database_copies': databaseCopies,
  '0021_site_domains': siteDomains,
  '0022_tls': tls,
  '0023_deployments': deployments,
  '0024_drop_database_copies': dropDatabaseCopies,
  '0025_node_replication': nodeReplication,
  '0026_site_analytics': siteAnalytics,
  '0027_site_past': sitePast,
  '0028_deployment_upload_charges': deploymentUploadCharges,
  '0029_database_replica_bytes': databaseReplicaBytes,
  '0030_deployment_applied_migrations': deploymentAppliedMigrations,
  '0031_site_analytics_hours': siteAnalyticsHours,
  '0032_preview_certificates': previewCertificates,
  '0033_builds': builds,
  '0034_build_charges': buildCharges,
  '0035_database_branches': databaseBranches,
  '0036_deployment_database_restore': deploymentDatabaseRestore,
};

export const migrationSource: Knex.MigrationSource<string> = {
  getMigrations: async () => Object.keys(migrations),
  getMigrationName: (name) => name,
  getMigration: async (name) => migrations[name]!,
};
