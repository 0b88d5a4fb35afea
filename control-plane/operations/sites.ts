// Sites: a bucket served at a subdomain.
import { z } from 'zod';
import * as sites from '../services/sites.ts';
import {
  CreateSiteBody,
  ListSitesQuery,
  Pagination,
  Site,
  SiteDetail,
  SiteParams,
  UpdateSiteBody,
} from '../schemas.ts';
import { defineOperation, withParams } from './operation.ts';

export const listSites = defineOperation({
  name: 'list_sites',
  description: 'List an account’s sites, most recently updated first',
  permission: 'READ',
  input: ListSitesQuery,
  output: z.object({ sites: z.array(Site), pagination: Pagination }),
  run: (deps, actor, input) => sites.listSites(deps, actor, input, input),
});

export const createSite = defineOperation({
  name: 'create_site',
  description: 'Create a site, with a new bucket unless bucketId names one',
  permission: 'WRITE',
  input: CreateSiteBody,
  output: Site,
  run: (deps, actor, input) => sites.createSite(deps, actor, input),
});

export const getSite = defineOperation({
  name: 'get_site',
  description: 'Get a site with its bucket and runtime reconciliation status',
  permission: 'READ',
  input: SiteParams,
  output: SiteDetail,
  run: (deps, actor, input) => sites.getSite(deps, actor, input.siteId),
});

export const updateSite = defineOperation({
  name: 'update_site',
  description: 'Rename, change access, archive or re-activate a site, or request runtime reconciliation',
  permission: 'WRITE',
  input: withParams(SiteParams, UpdateSiteBody).refine(
    ({ siteId: _, ...changes }) => Object.values(changes).some((v) => v !== undefined),
    {
      message: 'give at least one of name, access, status or reconcile',
    },
  ),
  output: SiteDetail,
  run: (deps, actor, { siteId, ...changes }) => sites.updateSite(deps, actor, siteId, changes),
});
