import { z } from 'zod';
import * as databases from '../../services/databases.ts';
import * as exportsService from '../../services/exports.ts';
import * as migrations from '../../services/migrations.ts';
import {
  ApplyMigrationBody,
  ApplyMigrationsBody,
  Database,
  DatabaseExport,
  DatabaseParams,
  DeleteDatabaseBody,
  DeletionChallenge,
  ExportParams,
  MigrationParams,
  MigrationReceipt,
  PageQuery,
  Pagination,
  QueryBody,
  QueryEnvelope,
  SiteParams,
} from '../../schemas.ts';
import type Koa from 'koa';
import { defineRoute } from '../route.ts';

/** The API's address as the caller reached it, for the links handed back to that caller. */
const publicOrigin = (ctx: Koa.Context) => `${ctx.protocol}://${ctx.get('Host')}`;

export const databaseRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v0/sites/:siteId/databases',
    operationId: 'listDatabases',
    summary: 'The site’s database (a site has at most one)',
    tag: 'Databases',
    params: SiteParams,
    query: PageQuery,
    responses: { 200: { description: 'a page of databases', schema: z.object({ databases: z.array(Database), pagination: Pagination }) } },
    handler: ({ deps, caller, params, query }) => databases.listDatabases(deps, caller, params.siteId, query),
  }),
  defineRoute({
    method: 'POST',
    path: '/v0/sites/:siteId/databases',
    operationId: 'createDatabase',
    summary: 'Create the site’s database, or finish an interrupted creation; repeating it is safe',
    tag: 'Databases',
    params: SiteParams,
    responses: {
      200: { description: 'the database', schema: z.object({ database: Database }) },
      409: { description: 'the site is archived (code "site_not_active")' },
    },
    handler: ({ deps, caller, params }) => databases.createDatabase(deps, caller, params.siteId),
  }),
  defineRoute({
    method: 'POST',
    path: '/v0/sites/:siteId/databases/:databaseId/query',
    operationId: 'queryDatabase',
    summary: 'Run one SQL statement (WRITE keys only, even for reads)',
    tag: 'Databases',
    params: DatabaseParams,
    body: QueryBody,
    responses: {
      200: { description: 'the statement’s rows and meta', schema: QueryEnvelope },
      400: { description: 'several statements (code "multiple_statements"), or the statement failed (envelope with success: false)', schema: QueryEnvelope },
    },
    handler: async ({ deps, caller, params, body, ctx }) => {
      const answer = await databases.queryDatabase(deps, caller, params.siteId, params.databaseId, body);
      ctx.status = answer.status;
      ctx.body = answer.body;
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/v0/sites/:siteId/databases/:databaseId/migrations',
    operationId: 'listDatabaseMigrations',
    summary: 'The receipts of applied migrations, in order',
    tag: 'Databases',
    params: DatabaseParams,
    responses: {
      200: { description: 'the database and its receipts', schema: z.object({ database: z.object({ id: z.string(), status: z.string() }), applied: z.array(MigrationReceipt) }) },
    },
    handler: ({ deps, caller, params }) => migrations.listMigrations(deps, caller, params.siteId, params.databaseId),
  }),
  defineRoute({
    method: 'GET',
    path: '/v0/sites/:siteId/databases/:databaseId/migrations/:migrationName',
    operationId: 'getDatabaseMigration',
    summary: 'One receipt, with its SQL when it was stored',
    tag: 'Databases',
    params: MigrationParams,
    responses: {
      200: {
        description: 'the migration',
        schema: z.object({ migration: z.object({ name: z.string(), checksum: z.string(), sourceAvailable: z.boolean(), sql: z.string().optional() }) }),
      },
    },
    handler: ({ deps, caller, params }) => migrations.getMigration(deps, caller, params.siteId, params.databaseId, params.migrationName),
  }),
  defineRoute({
    method: 'POST',
    path: '/v0/sites/:siteId/databases/:databaseId/migrations',
    operationId: 'applyDatabaseMigration',
    summary: 'Apply one migration with its receipt in one transaction',
    tag: 'Databases',
    params: DatabaseParams,
    body: ApplyMigrationBody,
    responses: {
      200: { description: 'applied, or alreadyApplied with the same SQL', schema: z.object({ migration: z.object({ name: z.string(), sql: z.string() }), alreadyApplied: z.boolean() }) },
      409: { description: 'applied before with other SQL (migration_history_conflict) or another run holds the lease (migration_in_progress); details say how to recover' },
      422: { description: 'the SQL failed and was rolled back, no receipt written (migration_failed)' },
    },
    handler: ({ deps, caller, params, body }) => migrations.applyMigration(deps, caller, params.siteId, params.databaseId, body),
  }),
  defineRoute({
    method: 'POST',
    path: '/v0/sites/:siteId/databases/:databaseId/migrations/apply',
    operationId: 'applyDatabaseMigrations',
    summary: 'Apply the pending tail of an ordered migration history',
    tag: 'Databases',
    params: DatabaseParams,
    body: ApplyMigrationsBody,
    responses: {
      200: { description: 'what was applied', schema: z.object({ appliedNames: z.array(z.string()), nextAction: z.string(), nextCommand: z.string() }) },
      409: { description: 'the list disagrees with the ledger (migration_history_conflict) or another run holds the lease (migration_in_progress)' },
      422: { description: 'a migration failed and was rolled back (migration_failed; details.appliedNames lists what was applied before it)' },
    },
    handler: ({ deps, caller, params, body }) => migrations.applyMigrations(deps, caller, params.siteId, params.databaseId, body.migrations),
  }),
  defineRoute({
    method: 'POST',
    path: '/v0/sites/:siteId/databases/:databaseId/deletion-challenges',
    operationId: 'createDatabaseDeletionChallenge',
    summary: 'Step one of deleting a database: a confirmation code valid for ten minutes',
    tag: 'Databases',
    params: DatabaseParams,
    responses: { 200: { description: 'the challenge', schema: DeletionChallenge } },
    handler: ({ deps, caller, params }) => databases.createDeletionChallenge(deps, caller, params.siteId, params.databaseId),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v0/sites/:siteId/databases/:databaseId',
    operationId: 'deleteDatabase',
    summary: 'Step two: delete the database for good with a current confirmation code (the bucket’s files stay)',
    tag: 'Databases',
    params: DatabaseParams,
    body: DeleteDatabaseBody,
    responses: {
      200: { description: 'deleted', schema: z.object({ deleted: z.literal(true), databaseId: z.string() }) },
      400: { description: 'the code is not this database’s (invalid_confirmation_code) or has expired (confirmation_code_expired)' },
    },
    handler: ({ deps, caller, params, body }) => databases.deleteDatabase(deps, caller, params.siteId, params.databaseId, body.confirmationCode),
  }),
  defineRoute({
    method: 'GET',
    path: '/v0/sites/:siteId/databases/:databaseId/exports',
    operationId: 'listDatabaseExports',
    summary: 'Exports of the database, newest first, failed ones included',
    tag: 'Databases',
    params: DatabaseParams,
    query: PageQuery,
    responses: { 200: { description: 'a page of exports', schema: z.object({ exports: z.array(DatabaseExport), pagination: Pagination }) } },
    handler: ({ deps, caller, params, query, ctx }) => exportsService.listExports(deps, caller, params.siteId, params.databaseId, query, publicOrigin(ctx)),
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
    handler: ({ deps, caller, params, ctx }) => exportsService.createExport(deps, caller, params.siteId, params.databaseId, publicOrigin(ctx)),
  }),
  defineRoute({
    method: 'POST',
    path: '/v0/sites/:siteId/databases/:databaseId/exports/:exportId/reconcile',
    operationId: 'reconcileDatabaseExport',
    summary: 'The export’s state; when COMPLETE, with a fresh signed downloadUrl',
    tag: 'Databases',
    params: ExportParams,
    responses: { 200: { description: 'the export', schema: z.object({ export: DatabaseExport }) } },
    handler: ({ deps, caller, params, ctx }) => exportsService.reconcileExport(deps, caller, params.siteId, params.databaseId, params.exportId, publicOrigin(ctx)),
  }),
];
