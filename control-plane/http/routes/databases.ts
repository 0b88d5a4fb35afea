import { z } from 'zod';
import * as databases from '../../services/databases.ts';
import { Database, DatabaseParams, PageQuery, Pagination, QueryBody, QueryEnvelope, SiteParams } from '../../schemas.ts';
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
];
