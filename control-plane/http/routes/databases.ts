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

/** The API's address as the client reached it, for the links handed back to that client. */
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
    handler: ({ deps, actor, params, query }) => databases.listDatabases(deps, actor, params.siteId, query),
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
    handler: ({ deps, actor, params }) => databases.createDatabase(deps, actor, params.siteId),
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
    handler: async ({ deps, actor, params, body, ctx }) => {
      const answer = await databases.queryDatabase(deps, actor, params.siteId, params.databaseId, body);
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
    handler: ({ deps, actor, params }) => migrations.listMigrations(deps, actor, params.siteId, params.databaseId),
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
    handler: ({ deps, actor, params }) => migrations.getMigration(deps, actor, params.siteId, params.databaseId, params.migrationName),
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
    handler: ({ deps, actor, params, body }) => migrations.applyMigration(deps, actor, params.siteId, params.databaseId, body),
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
    handler: ({ deps, actor, params, body }) => migrations.applyMigrations(deps, actor, params.siteId, params.databaseId, body.migrations),
  }),
  defineRoute({
    method: 'POST',
    path: '/v0/sites/:siteId/databases/:databaseId/deletion-challenges',
    operationId: 'createDatabaseDeletionChallenge',
    summary: 'Step one of deleting a database: a confirmation code valid for ten minutes',
    tag: 'Databases',
    params: DatabaseParams,
    responses: { 200: { description: 'the challenge', schema: DeletionChallenge } },
    handler: ({ deps, actor, params }) => databases.createDeletionChallenge(deps, actor, params.siteId, params.databaseId),
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
    handler: ({ deps, actor, params, body }) => databases.deleteDatabase(deps, actor, params.siteId, params.databaseId, body.confirmationCode),
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
