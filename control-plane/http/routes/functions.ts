import * as functions from '../../operations/functions.ts';
import type { OperationRoute } from '../route.ts';

export const functionRoutes: OperationRoute[] = [
  {
    operation: functions.listFunctions,
    method: 'GET',
    path: '/v0/sites/:siteId/functions',
    operationId: 'listFunctions',
    tag: 'Functions',
    ok: 'a page of functions',
  },
  {
    operation: functions.deployFunction,
    method: 'POST',
    path: '/v0/sites/:siteId/functions/deploy',
    operationId: 'deployFunction',
    tag: 'Functions',
    ok: 'the deployed function',
    errors: {
      409: { description: 'the site is archived (code "site_not_active")' },
      422: {
        description:
          'the source breaks the v0 rules (code "function_compile_failed"; details.function is the function record)',
      },
    },
  },
  {
    operation: functions.listFunctionLogs,
    method: 'GET',
    path: '/v0/sites/:siteId/logs',
    operationId: 'listFunctionLogs',
    tag: 'Functions',
    ok: 'a page of log lines',
  },
  {
    operation: functions.listCronRuns,
    method: 'GET',
    path: '/v0/sites/:siteId/cron_runs',
    operationId: 'listCronRuns',
    tag: 'Functions',
    ok: 'a page of runs',
  },
];
