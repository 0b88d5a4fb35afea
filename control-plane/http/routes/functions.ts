import * as functions from '../../operations/functions.ts';
import { LogStreamQuery, SiteParams } from '../../schemas.ts';
import { streamLogs } from '../log-stream.ts';
import { type AnyRoute, defineRoute } from '../route.ts';

export const functionRoutes: AnyRoute[] = [
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
  defineRoute({
    method: 'GET',
    path: '/v0/sites/:siteId/logs/stream',
    operationId: 'streamFunctionLogs',
    summary:
      'Follow the console output of the site’s functions as server-sent events: one `event: log` per line, its `id` the line’s id and its `data` the line as the list gives it; a `Last-Event-ID` header (or `since`) resumes after that line, and a comment every 15 s keeps the stream open',
    tag: 'Functions',
    params: SiteParams,
    query: LogStreamQuery,
    headers: { 'Last-Event-ID': 'the id of the last line received: the stream resumes after it' },
    responses: {
      200: {
        description: 'the stream of lines, until the client or the server closes it',
        contentType: 'text/event-stream',
      },
      429: {
        description: 'the account has 8 streams open on this server already (code "too_many_attempts")',
      },
    },
    handler: ({ deps, actor, params, query, ctx }) => streamLogs(deps, actor, ctx, params.siteId, query),
  }),
  {
    operation: functions.listCronRuns,
    method: 'GET',
    path: '/v0/sites/:siteId/cron_runs',
    operationId: 'listCronRuns',
    tag: 'Functions',
    ok: 'a page of runs',
  },
];
