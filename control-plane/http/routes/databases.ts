import { z } from 'zod';
import * as db from '../../operations/databases.ts';
import { Pagination, QueryEnvelope, RestDatabaseExport } from '../../schemas.ts';
import type { OperationRoute } from '../route.ts';

type ExportRecord = { id: string; download?: { token: string; expiresAt: string } };

function withDownloadUrl({ download, ...record }: ExportRecord, origin: string) {
  if (!download) return record;
  return {
    ...record,
    downloadUrl: `${origin}/v0/exports/${record.id}/download?${download.token}`,
    downloadUrlExpiresAt: download.expiresAt,
  };
}

export const databaseRoutes: OperationRoute[] = [
  {
    operation: db.listDatabases,
    method: 'GET',
    path: '/v0/sites/:siteId/databases',
    operationId: 'listDatabases',
    tag: 'Databases',
    ok: 'a page of databases',
  },
  {
    operation: db.createDatabase,
    method: 'POST',
    path: '/v0/sites/:siteId/databases',
    operationId: 'createDatabase',
    tag: 'Databases',
    ok: 'the database',
    errors: { 409: { description: 'the site is archived (code "site_not_active")' } },
  },
  {
    operation: db.queryDatabase,
    method: 'POST',
    path: '/v0/sites/:siteId/databases/:databaseId/query',
    operationId: 'queryDatabase',
    tag: 'Databases',
    status: (envelope: { success: boolean }) => (envelope.success ? 200 : 400),
    ok: 'the statement’s rows and meta',
    errors: {
      400: {
        description:
          'several statements (code "multiple_statements"), or the statement failed (envelope with success: false)',
        schema: QueryEnvelope,
      },
    },
  },
  {
    operation: db.listDatabaseMigrations,
    method: 'GET',
    path: '/v0/sites/:siteId/databases/:databaseId/migrations',
    operationId: 'listDatabaseMigrations',
    tag: 'Databases',
    ok: 'the database and its receipts',
  },
  {
    operation: db.getDatabaseMigration,
    method: 'GET',
    path: '/v0/sites/:siteId/databases/:databaseId/migrations/:migrationName',
    operationId: 'getDatabaseMigration',
    tag: 'Databases',
    ok: 'the migration',
  },
  {
    operation: db.applyDatabaseMigration,
    method: 'POST',
    path: '/v0/sites/:siteId/databases/:databaseId/migrations',
    operationId: 'applyDatabaseMigration',
    tag: 'Databases',
    ok: 'applied, or alreadyApplied with the same SQL',
    errors: {
      409: {
        description:
          'applied before with other SQL (migration_history_conflict) or another run holds the lease (migration_in_progress); details say how to recover',
      },
      422: { description: 'the SQL failed and was rolled back, no receipt written (migration_failed)' },
    },
  },
  {
    operation: db.applyDatabaseMigrations,
    method: 'POST',
    path: '/v0/sites/:siteId/databases/:databaseId/migrations/apply',
    operationId: 'applyDatabaseMigrations',
    tag: 'Databases',
    ok: 'what was applied',
    errors: {
      409: {
        description:
          'the list disagrees with the ledger (migration_history_conflict) or another run holds the lease (migration_in_progress)',
      },
      422: {
        description:
          'a migration failed and was rolled back (migration_failed; details.appliedNames lists what was applied before it)',
      },
    },
  },
  {
    operation: db.compactDatabase,
    method: 'POST',
    path: '/v0/sites/:siteId/databases/:databaseId/compact',
    operationId: 'compactDatabase',
    tag: 'Databases',
    ok: 'the size before and after',
  },
  {
    operation: db.getDatabaseRestorePoints,
    method: 'GET',
    path: '/v0/sites/:siteId/databases/:databaseId/restore-points',
    operationId: 'getDatabaseRestorePoints',
    tag: 'Databases',
    ok: 'the oldest and newest restorable moment',
  },
  {
    operation: db.restoreDatabase,
    method: 'POST',
    path: '/v0/sites/:siteId/databases/:databaseId/restore',
    operationId: 'restoreDatabase',
    tag: 'Databases',
    ok: 'the moment restored to, and the moment before the restore (restorable itself)',
    errors: {
      422: {
        description:
          'the moment is outside what the replica holds (restore_point_unavailable; details.earliest and details.latest give the range)',
      },
    },
  },
  {
    operation: db.createDatabaseDeletionChallenge,
    method: 'POST',
    path: '/v0/sites/:siteId/databases/:databaseId/deletion-challenges',
    operationId: 'createDatabaseDeletionChallenge',
    tag: 'Databases',
    ok: 'the challenge',
  },
  {
    operation: db.deleteDatabase,
    method: 'DELETE',
    path: '/v0/sites/:siteId/databases/:databaseId',
    operationId: 'deleteDatabase',
    tag: 'Databases',
    ok: 'deleted',
    errors: {
      400: {
        description:
          'the code is not this database’s (invalid_confirmation_code) or has expired (confirmation_code_expired)',
      },
    },
  },
  {
    operation: db.listDatabaseExports,
    method: 'GET',
    path: '/v0/sites/:siteId/databases/:databaseId/exports',
    operationId: 'listDatabaseExports',
    tag: 'Databases',
    ok: 'a page of exports',
    presents: z.object({ exports: z.array(RestDatabaseExport), pagination: Pagination }),
    present: (output: { exports: ExportRecord[] }, origin) => ({
      ...output,
      exports: output.exports.map((record) => withDownloadUrl(record, origin)),
    }),
  },
  {
    operation: db.createDatabaseExport,
    method: 'POST',
    path: '/v0/sites/:siteId/databases/:databaseId/exports',
    operationId: 'createDatabaseExport',
    tag: 'Databases',
    ok: 'the export, PROCESSING',
    errors: { 409: { description: 'an export of this database is already running (export_in_progress)' } },
    presents: z.object({ export: RestDatabaseExport }),
    present: (output: { export: ExportRecord }, origin) => ({ export: withDownloadUrl(output.export, origin) }),
  },
  {
    operation: db.reconcileDatabaseExport,
    method: 'POST',
    path: '/v0/sites/:siteId/databases/:databaseId/exports/:exportId/reconcile',
    operationId: 'reconcileDatabaseExport',
    tag: 'Databases',
    ok: 'the export; when COMPLETE, with a fresh signed downloadUrl',
    presents: z.object({ export: RestDatabaseExport }),
    present: (output: { export: ExportRecord }, origin) => ({ export: withDownloadUrl(output.export, origin) }),
  },
];
