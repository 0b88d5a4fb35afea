// Functions and cron jobs: their deployments, console output and runs.
import { z } from 'zod';
import * as functions from '../services/functions.ts';
import { listCronRuns as cronRuns } from '../services/cron.ts';
import { listLogs } from '../logs/function-logs.ts';
import {
  CronRun,
  DeployFunctionBody,
  FunctionLogLine,
  FunctionRecord,
  ListCronRunsQuery,
  LogFilterQuery,
  PageQuery,
  Pagination,
  SiteParams,
} from '../schemas.ts';
import { defineOperation, withParams } from './operation.ts';

export const listFunctions = defineOperation({
  name: 'list_functions',
  description: 'List a site’s functions with their deployment status, by path',
  permission: 'READ',
  input: SiteParams.extend(PageQuery.shape),
  output: z.object({ functions: z.array(FunctionRecord), pagination: Pagination }),
  run: (deps, actor, { siteId, ...page }) => functions.listFunctions(deps, actor, siteId, page),
});

export const deployFunction = defineOperation({
  name: 'deploy_function',
  description: 'Deploy a function source already stored in the site’s bucket',
  permission: 'WRITE',
  input: withParams(SiteParams, DeployFunctionBody),
  output: z.object({ function: FunctionRecord }),
  run: (deps, actor, input) => functions.deployFunction(deps, actor, input.siteId, input.path),
});

export const listFunctionLogs = defineOperation({
  name: 'list_function_logs',
  description: 'Console output of the site’s functions, newest first, optionally of one function, level or text',
  permission: 'READ',
  input: SiteParams.extend(PageQuery.shape).extend(LogFilterQuery.shape),
  output: z.object({ logs: z.array(FunctionLogLine), pagination: Pagination }),
  run: (deps, actor, { siteId, limit, offset, ...filter }) => listLogs(deps, actor, siteId, { limit, offset }, filter),
});

export const listCronRuns = defineOperation({
  name: 'list_cron_runs',
  description: 'Runs of the site’s cron jobs, newest scheduled time first',
  permission: 'READ',
  input: SiteParams.extend(ListCronRunsQuery.shape),
  output: z.object({ runs: z.array(CronRun), pagination: Pagination }),
  run: (deps, actor, { siteId, ...query }) => cronRuns(deps, actor, siteId, query, query),
});
