import { z } from 'zod';
import * as databases from '../../services/databases.ts';
import * as migrations from '../../services/migrations.ts';
import {
  ApplyMigrationBody,
  ApplyMigrationsBody,
  Database,
  DatabaseParams,
  MigrationParams,
  MigrationReceipt,
  PageQuery,
  Pagination,
  QueryBody,
  QueryEnvelope,
  SiteParams,
} from '../../schemas.ts';
import { defineRoute } from '../route.ts';

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
];
