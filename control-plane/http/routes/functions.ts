import { z } from 'zod';
import * as functions from '../../services/functions.ts';
import { listCronRuns } from '../../services/cron.ts';
import { listLogs } from '../../services/function-logs.ts';
import { CronRun, DeployFunctionBody, FunctionLogLine, FunctionRecord, ListCronRunsQuery, PageQuery, Pagination, SiteParams } from '../../schemas.ts';
import { defineRoute } from '../route.ts';


export const functionRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v0/sites/:siteId/functions',
    operationId: 'listFunctions',
    summary: 'List a site’s functions with their deployment status, by path',
    tag: 'Functions',
    params: SiteParams,
    query: PageQuery,
    responses: { 200: { description: 'a page of functions', schema: z.object({ functions: z.array(FunctionRecord), pagination: Pagination }) } },
    handler: ({ deps, actor, params, query }) => functions.listFunctions(deps, actor, params.siteId, query),
  }),
  defineRoute({
    method: 'POST',
    path: '/v0/sites/:siteId/functions/deploy',
    operationId: 'deployFunction',
    summary: 'Deploy a function source already stored in the site’s bucket',
    tag: 'Functions',
    params: SiteParams,
    body: DeployFunctionBody,
    responses: {
      200: { description: 'the deployed function', schema: z.object({ function: FunctionRecord }) },
      409: { description: 'the site is archived (code "site_not_active")' },
      422: { description: 'the source breaks the v0 rules (code "function_compile_failed"; details.function is the function record)' },
    },
    handler: ({ deps, actor, params, body }) => functions.deployFunction(deps, actor, params.siteId, body.path),
  }),
  defineRoute({
    method: 'GET',
    path: '/v0/sites/:siteId/logs',
    operationId: 'listFunctionLogs',
    summary: 'Console output of the site’s functions, newest first',
    tag: 'Functions',
    params: SiteParams,
    query: PageQuery,
    responses: { 200: { description: 'a page of log lines', schema: z.object({ logs: z.array(FunctionLogLine), pagination: Pagination }) } },
    handler: ({ deps, actor, params, query }) => listLogs(deps, actor, params.siteId, query),
  }),
  defineRoute({
    method: 'GET',
    path: '/v0/sites/:siteId/cron_runs',
    operationId: 'listCronRuns',
    summary: 'Runs of the site’s cron jobs, newest scheduled time first',
    tag: 'Functions',
    params: SiteParams,
    query: ListCronRunsQuery,
    responses: { 200: { description: 'a page of runs', schema: z.object({ runs: z.array(CronRun), pagination: Pagination }) } },
    handler: ({ deps, actor, params, query }) => listCronRuns(deps, actor, params.siteId, query, query),
  }),
];
