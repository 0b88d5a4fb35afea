import { z } from 'zod';
import * as sites from '../../services/sites.ts';
import { CreateSiteBody, ListSitesQuery, Pagination, Site, SiteDetail, SiteParams, UpdateSiteBody } from '../../schemas.ts';
import { defineRoute } from '../route.ts';


export const siteRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v0/sites',
    operationId: 'listSites',
    summary: 'List an account’s sites, most recently updated first',
    tag: 'Sites',
    query: ListSitesQuery,
    responses: { 200: { description: 'a page of sites', schema: z.object({ sites: z.array(Site), pagination: Pagination }) } },
    handler: ({ deps, actor, query }) => sites.listSites(deps, actor, query, query),
  }),
  defineRoute({
    method: 'POST',
    path: '/v0/sites',
    operationId: 'createSite',
    summary: 'Create a site, with a new bucket unless bucketId names one',
    tag: 'Sites',
    body: CreateSiteBody,
    status: 201,
    responses: {
      201: { description: 'the new site', schema: Site },
      409: { description: 'subdomain reserved or taken, or the bucket already has a site', schema: z.object({ error: z.object({ code: z.enum(['subdomain_reserved', 'subdomain_taken', 'bucket_has_site']), message: z.string() }) }) },
      422: { description: 'the plan’s site limit is reached (code "site_limit_reached")' },
    },
    handler: ({ deps, actor, body }) => sites.createSite(deps, actor, body),
  }),
  defineRoute({
    method: 'GET',
    path: '/v0/sites/:siteId',
    operationId: 'getSite',
    summary: 'Get a site with its bucket and runtime reconciliation status',
    tag: 'Sites',
    params: SiteParams,
    responses: { 200: { description: 'the site', schema: SiteDetail } },
    handler: ({ deps, actor, params }) => sites.getSite(deps, actor, params.siteId),
  }),
  defineRoute({
    method: 'POST',
    path: '/v0/sites/:siteId',
    operationId: 'updateSite',
    summary: 'Rename, change access, archive or re-activate a site, or request runtime reconciliation',
    tag: 'Sites',
    params: SiteParams,
    body: UpdateSiteBody,
    responses: {
      200: { description: 'the updated site', schema: SiteDetail },
      409: { description: 'reconcile requested on an archived site (code "site_not_active")' },
    },
    handler: ({ deps, actor, params, body }) => sites.updateSite(deps, actor, params.siteId, body),
  }),
];
