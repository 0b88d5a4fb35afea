// Analytics: a site's traffic, and every site's of an account, over a range.
import { z } from 'zod';
import * as analytics from '../services/analytics.ts';
import { AccountAnalytics, AnalyticsQuery, SiteAnalytics, SiteParams, Uuid } from '../schemas.ts';
import { defineOperation } from './operation.ts';

export const getSiteAnalytics = defineOperation({
  name: 'get_site_analytics',
  description:
    'A site’s traffic over a range (default: the last 24 hours): requests by status class, bytes sent, function calls, errors, cold starts, latency percentiles, top paths and referrer hosts, as totals and a series',
  permission: 'READ',
  input: SiteParams.extend(AnalyticsQuery.shape),
  output: SiteAnalytics,
  run: (deps, actor, { siteId, ...range }) => analytics.siteAnalytics(deps, actor, siteId, range),
});

export const getAccountAnalytics = defineOperation({
  name: 'get_account_analytics',
  description: 'Every site’s traffic over a range, with the account’s totals',
  permission: 'READ',
  input: z.object({ accountId: Uuid }).extend(AnalyticsQuery.shape),
  output: AccountAnalytics,
  run: (deps, actor, { accountId, ...range }) => analytics.accountAnalytics(deps, actor, accountId, range),
});
