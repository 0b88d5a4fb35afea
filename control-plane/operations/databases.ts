// Site databases: creation, the one-statement query, numbered migrations, compaction and the two-step deletion.
import { z } from 'zod';
import * as databases from '../services/databases.ts';
import * as exportsService from '../services/exports.ts';
import * as migrations from '../services/migrations.ts';
import {
  ApplyMigrationBody,
  ApplyMigrationsBody,
  Database,
  DatabaseCompaction,
  DatabaseExport,
  DatabaseParams,
  DatabaseRestore,
  DeleteDatabaseBody,
  DeletionChallenge,
  ExportParams,
  MigrationDetail,
  MigrationParams,
  MigrationReceipt,
  NextStep,
  PageQuery,
  Pagination,
  QueryBody,
  QueryEnvelope,
  RestorePoints,
  SiteParams,
  Timestamp,
} from '../schemas.ts';
import { defineOperation, withParams } from './operation.ts';

const DatabaseResult = z.object({ database: Database });

export const listDatabases = defineOperation({
  name: 'list_databases',
  description: 'The site’s database (a site has at most one)',
  permission: 'READ',
  input: SiteParams.extend(PageQuery.shape),
  output: z.object({ databases: z.array(Database), pagination: Pagination }),
  run: (deps, actor, { siteId, ...page }) => databases.listDatabases(deps, actor, siteId, page),
});

export const createDatabase = defineOperation({
  name: 'create_database',
  description: 'Create the site’s database, or finish an interrupted creation; repeating it is safe',
  permission: 'WRITE',
  input: SiteParams.strict(),
  output: DatabaseResult,
  run: (deps, actor, input) => databases.createDatabase(deps, actor, input.siteId),
});

export const queryDatabase = defineOperation({
  name: 'query_database',
  description:
    'Run one SQL statement on the site’s database (WRITE, even for reads); a failed statement answers success: false',
  permission: 'WRITE',
  input: withParams(DatabaseParams, QueryBody),
  output: QueryEnvelope,
  run: (deps, actor, { siteId, databaseId, ...statement }) =>
    databases.queryDatabase(deps, actor, siteId, databaseId, statement),
});

export const listDatabaseMigrations = defineOperation({
  name: 'list_database_migrations',
  description: 'The receipts of applied migrations, in order',
  permission: 'READ',
  input: DatabaseParams,
  output: z.object({ database: z.object({ id: z.string(), status: z.string() }), applied: z.array(MigrationReceipt) }),
  run: (deps, actor, input) => migrations.listMigrations(deps, actor, input.siteId, input.databaseId),
});

export const getDatabaseMigration = defineOperation({
  name: 'get_database_migration',
  description: 'One migration receipt, with its SQL when it was stored',
  permission: 'READ',
  input: MigrationParams,
  output: z.object({ migration: MigrationDetail }),
  run: (deps, actor, input) =>
    migrations.getMigration(deps, actor, input.siteId, input.databaseId, input.migrationName),
});

export const applyDatabaseMigration = defineOperation({
  name: 'apply_database_migration',
  description:
    'Apply one numbered migration with its receipt in one transaction (confirm: true); the same name and SQL again is alreadyApplied',
  permission: 'WRITE',
  input: withParams(DatabaseParams, ApplyMigrationBody),
  output: z.object({ migration: z.object({ name: z.string(), sql: z.string() }), alreadyApplied: z.boolean() }),
  run: (deps, actor, { siteId, databaseId, name, sql }) =>
    migrations.applyMigration(deps, actor, siteId, databaseId, { name, sql }),
});

export const applyDatabaseMigrations = defineOperation({
  name: 'apply_database_migrations',
  description: 'Apply the pending tail of an ordered migration history (confirm: true)',
  permission: 'WRITE',
  input: withParams(DatabaseParams, ApplyMigrationsBody),
  output: z.object({ appliedNames: z.array(z.string()), nextAction: z.string(), next: NextStep }),
  run: (deps, actor, input) =>
    migrations.applyMigrations(deps, actor, input.siteId, input.databaseId, input.migrations),
});

export const compactDatabase = defineOperation({
  name: 'compact_database',
  description:
    'Rewrite the site’s database without the free space deleted rows left (VACUUM, between statements); says what that gave back',
  permission: 'WRITE',
  input: DatabaseParams.strict(),
  output: DatabaseCompaction,
  run: (deps, actor, input) => databases.compactDatabase(deps, actor, input.siteId, input.databaseId),
});

export const getDatabaseRestorePoints = defineOperation({
  name: 'get_database_restore_points',
  description: 'The oldest and newest moment the database can be restored to (null: nothing replicated yet)',
  permission: 'READ',
  input: DatabaseParams,
  output: RestorePoints,
  run: (deps, actor, input) => databases.databaseRestorePoints(deps, actor, input.siteId, input.databaseId),
});

export const restoreDatabase = defineOperation({
  name: 'restore_database',
  audience: 'admins',
  description:
    'Put the database back as it was at a moment (RFC 3339, to the second) within its restore points; the moment before the restore stays restorable',
  permission: 'WRITE',
  destructive: true,
  input: withParams(DatabaseParams, z.object({ at: Timestamp })),
  output: DatabaseRestore,
  run: (deps, actor, input) => databases.restoreDatabase(deps, actor, input.siteId, input.databaseId, input.at),
});

export const createDatabaseDeletionChallenge = defineOperation({
  name: 'create_database_deletion_challenge',
  audience: 'admins',
  description: 'Step one of deleting a database: a confirmation code valid for ten minutes',
  permission: 'WRITE',
  input: DatabaseParams.strict(),
  output: DeletionChallenge,
  run: (deps, actor, input) => databases.createDeletionChallenge(deps, actor, input.siteId, input.databaseId),
});

export const deleteDatabase = defineOperation({
  name: 'delete_database',
  audience: 'admins',
  description: 'Step two: delete the database for good with a current confirmation code (the bucket’s files stay)',
  permission: 'WRITE',
  destructive: true,
  input: withParams(DatabaseParams, DeleteDatabaseBody),
  output: z.object({ deleted: z.literal(true), databaseId: z.string() }),
  run: (deps, actor, input) =>
    databases.deleteDatabase(deps, actor, input.siteId, input.databaseId, input.confirmationCode),
});

export const listDatabaseExports = defineOperation({
  name: 'list_database_exports',
  audience: 'admins',
  description: 'Exports of the database, newest first, failed ones included',
  permission: 'READ',
  input: DatabaseParams.extend(PageQuery.shape),
  output: z.object({ exports: z.array(DatabaseExport), pagination: Pagination }),
  run: (deps, actor, { siteId, databaseId, ...page }) =>
    exportsService.listExports(deps, actor, siteId, databaseId, page),
});

export const createDatabaseExport = defineOperation({
  name: 'create_database_export',
  audience: 'admins',
  description: 'Start an SQL dump of the database (archived sites too); reconcile it until COMPLETE or ERROR',
  permission: 'WRITE',
  input: DatabaseParams.strict(),
  output: z.object({ export: DatabaseExport }),
  run: (deps, actor, input) => exportsService.createExport(deps, actor, input.siteId, input.databaseId),
});

export const reconcileDatabaseExport = defineOperation({
  name: 'reconcile_database_export',
  audience: 'admins',
  description: 'The export’s state; when COMPLETE, with a freshly signed download token',
  permission: 'WRITE',
  input: ExportParams.strict(),
  output: z.object({ export: DatabaseExport }),
  run: (deps, actor, input) =>
    exportsService.reconcileExport(deps, actor, input.siteId, input.databaseId, input.exportId),
});
