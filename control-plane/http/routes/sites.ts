import { z } from 'zod';
import * as sites from '../../operations/sites.ts';
import type { OperationRoute } from '../route.ts';

export const siteRoutes: OperationRoute[] = [
  {
    operation: sites.listSites,
    method: 'GET',
    path: '/v0/sites',
    operationId: 'listSites',
    tag: 'Sites',
    ok: 'a page of sites',
  },
  {
    operation: sites.createSite,
    method: 'POST',
    path: '/v0/sites',
    operationId: 'createSite',
    tag: 'Sites',
    status: 201,
    ok: 'the new site',
    errors: {
      409: {
        description: 'subdomain reserved or taken, or the bucket already has a site',
        schema: z.object({
          error: z.object({
            code: z.enum(['subdomain_reserved', 'subdomain_taken', 'bucket_has_site']),
            message: z.string(),
          }),
        }),
      },
      422: { description: 'the plan’s site limit is reached (code "site_limit_reached")' },
    },
  },
  {
    operation: sites.getSite,
    method: 'GET',
    path: '/v0/sites/:siteId',
    operationId: 'getSite',
    tag: 'Sites',
    ok: 'the site',
  },
  {
    operation: sites.updateSite,
    method: 'POST',
    path: '/v0/sites/:siteId',
    operationId: 'updateSite',
    tag: 'Sites',
    ok: 'the updated site',
    errors: { 409: { description: 'reconcile requested on an archived site (code "site_not_active")' } },
  },
];
