// The whole REST API at a glance: each resource's routes, in the order the spec lists them.
import type { AnyRoute } from '../route.ts';
import { accountRoutes } from './accounts.ts';
import { analyticsRoutes } from './analytics.ts';
import { bucketRoutes } from './buckets.ts';
import { databaseRoutes } from './databases.ts';
import { deploymentRoutes } from './deployments.ts';
import { domainRoutes } from './domains.ts';
import { fileRoutes } from './files.ts';
import { functionRoutes } from './functions.ts';
import { peopleRoutes } from './people.ts';
import { secretRoutes } from './secrets.ts';
import { siteRoutes } from './sites.ts';

export const apiRoutes: AnyRoute[] = [
  ...accountRoutes,
  ...bucketRoutes,
  ...siteRoutes,
  ...domainRoutes,
  ...deploymentRoutes,
  ...fileRoutes,
  ...functionRoutes,
  ...secretRoutes,
  ...databaseRoutes,
  ...peopleRoutes,
  ...analyticsRoutes,
];
