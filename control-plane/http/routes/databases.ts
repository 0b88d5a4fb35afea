import type Koa from 'koa';
import { z } from 'zod';
import * as db from '../../operations/databases.ts';
import * as exportsService from '../../services/exports.ts';
import { DatabaseExport, DatabaseParams, ExportParams, PageQuery, Pagination, QueryEnvelope } from '../../schemas.ts';
import { type AnyRoute, defineRoute } from '../route.ts';

/** The API's address as the client reached it, for the links handed back to that client. */
const publicOrigin = (ctx: Koa.Context) => `${ctx.protocol}://${ctx.get('Host')}`;


export const databaseRoutes: AnyRoute[] = [
  { operation: db.listDatabases, method: 'GET', path: '/v0/sites/:siteId/databases', operationId: 'listDatabases', tag: 'Databases', ok: 'a page of databases' },
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
    errors: { 400: { description: 'several statements (code "multiple_statements"), or the statement failed (envelope with success: false)', schema: QueryEnvelope } },
  },
  { operation: db.listDatabaseMigrations, method: 'GET', path: '/v0/sites/:siteId/databases/:databaseId/migrations', operationId: 'listDatabaseMigrations', tag: 'Databases', ok: 'the database and its receipts' },
  { operation: db.getDatabaseMigration, method: 'GET', path: '/v0/sites/:siteId/databases/:databaseId/migrations/:migrationName', operationId: 'getDatabaseMigration', tag: 'Databases', ok: 'the migration' },
  {
    operation: db.applyDatabaseMigration,
    method: 'POST',
    path: '/v0/sites/:siteId/databases/:databaseId/migrations',
    operationId: 'applyDatabaseMigration',
    tag: 'Databases',
    ok: 'applied, or alreadyApplied with the same SQL',
    errors: {
      409: { description: 'applied before with other SQL (migration_history_conflict) or another run holds the lease (migration_in_progress); details say how to recover' },
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
      409: { description: 'the list disagrees with the ledger (migration_history_conflict) or another run holds the lease (migration_in_progress)' },
      422: { description: 'a migration failed and was rolled back (migration_failed; details.appliedNames lists what was applied before it)' },
    },
  },
  { operation: db.createDatabaseDeletionChallenge, method: 'POST', path: '/v0/sites/:siteId/databases/:databaseId/deletion-challenges', operationId: 'createDatabaseDeletionChallenge', tag: 'Databases', ok: 'the challenge' },
  {
    operation: db.deleteDatabase,
    method: 'DELETE',
    path: '/v0/sites/:siteId/databases/:databaseId',
    operationId: 'deleteDatabase',
    tag: 'Databases',
    ok: 'deleted',
    errors: { 400: { description: 'the code is not this database’s (invalid_confirmation_code) or has expired (confirmation_code_expired)' } },
  },
  defineRoute({
    method: 'GET',
    path: '/v0/sites/:siteId/databases/:databaseId/exports',
    operationId: 'listDatabaseExports',
    summary: 'Exports of the database, newest first, failed ones included',
    tag: 'Databases',
    params: DatabaseParams,
    query: PageQuery,
    responses: { 200: { description: 'a page of exports', schema: z.object({ exports: z.array(DatabaseExport), pagination: Pagination }) } },
    handler: ({ deps, actor, params, query, ctx }) => exportsService.listExports(deps, actor, params.siteId, params.databaseId, query, publicOrigin(ctx)),
  }),
  defineRoute({
    method: 'POST',
    path: '/v0/sites/:siteId/databases/:databaseId/exports',
    operationId: 'createDatabaseExport',
    summary: 'Start an SQL dump of the database (archived sites too); reconcile it until COMPLETE or ERROR',
    tag: 'Databases',
    params: DatabaseParams,
    responses: {
      200: { description: 'the export, PROCESSING', schema: z.object({ export: DatabaseExport }) },
      409: { description: 'an export of this database is already running (export_in_progress)' },
    },
    handler: ({ deps, actor, params, ctx }) => exportsService.createExport(deps, actor, params.siteId, params.databaseId, publicOrigin(ctx)),
  }),
  defineRoute({
    method: 'POST',
    path: '/v0/sites/:siteId/databases/:databaseId/exports/:exportId/reconcile',
    operationId: 'reconcileDatabaseExport',
    summary: 'The export’s state; when COMPLETE, with a fresh signed downloadUrl',
    tag: 'Databases',
    params: ExportParams,
    responses: { 200: { description: 'the export', schema: z.object({ export: DatabaseExport }) } },
    handler: ({ deps, actor, params, ctx }) => exportsService.reconcileExport(deps, actor, params.siteId, params.databaseId, params.exportId, publicOrigin(ctx)),
  }),
];
