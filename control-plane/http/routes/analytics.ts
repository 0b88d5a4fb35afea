import * as analytics from '../../operations/analytics.ts';
import type { OperationRoute } from '../route.ts';

export const analyticsRoutes: OperationRoute[] = [
  {
    operation: analytics.getSiteAnalytics,
    method: 'GET',
    path: '/v0/sites/:siteId/analytics',
    operationId: 'getSiteAnalytics',
    tag: 'Analytics',
    ok: 'the site’s totals, series, top paths and referrer hosts',
  },
  {
    operation: analytics.getAccountAnalytics,
    method: 'GET',
    path: '/v0/accounts/:accountId/analytics',
    operationId: 'getAccountAnalytics',
    tag: 'Analytics',
    ok: 'the account’s totals and series, and each site’s',
  },
];
