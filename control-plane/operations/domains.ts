// A site's custom domains: added as PENDING with the TXT record to create, verified by looking the
// record up, then served (domains/domains.ts); one may be made canonical.
import { z } from 'zod';
import * as domains from '../domains/domains.ts';
import {
  AddDomainBody,
  DomainRecord,
  Hostname,
  PageQuery,
  Pagination,
  SiteParams,
  UpdateDomainBody,
} from '../schemas.ts';
import { defineOperation, withParams } from './operation.ts';

const DomainParams = SiteParams.extend({ hostname: Hostname });
const OneDomain = z.object({ domain: DomainRecord });

export const listDomains = defineOperation({
  name: 'list_domains',
  description: 'List a site’s custom domains with their state and the DNS record each needs',
  permission: 'READ',
  input: SiteParams.extend(PageQuery.shape),
  output: z.object({ domains: z.array(DomainRecord), pagination: Pagination }),
  run: (deps, actor, { siteId, ...page }) => domains.listDomains(deps, actor, siteId, page),
});

export const getDomain = defineOperation({
  name: 'get_domain',
  description: 'One custom domain of a site',
  permission: 'READ',
  input: DomainParams,
  output: OneDomain,
  run: (deps, actor, input) => domains.getDomain(deps, actor, input.siteId, input.hostname),
});

export const addDomain = defineOperation({
  name: 'add_domain',
  description:
    'Add a custom domain to a site; it is PENDING until the TXT record in `verification` exists and verify_domain sees it',
  permission: 'WRITE',
  input: withParams(SiteParams, AddDomainBody),
  output: OneDomain,
  run: (deps, actor, { siteId, hostname }) => domains.addDomain(deps, actor, siteId, { hostname }),
});

export const verifyDomain = defineOperation({
  name: 'verify_domain',
  description: 'Look the domain’s TXT record up; once it is there the domain is ACTIVE and served',
  permission: 'WRITE',
  input: DomainParams,
  output: OneDomain,
  run: (deps, actor, input) => domains.verifyDomain(deps, actor, input.siteId, input.hostname),
});

export const updateDomain = defineOperation({
  name: 'update_domain',
  description: 'Make a domain the site’s canonical name (its other names answer 308 to it), or stop it being one',
  permission: 'WRITE',
  input: withParams(DomainParams, UpdateDomainBody),
  output: OneDomain,
  run: (deps, actor, { siteId, hostname, ...settings }) =>
    domains.updateDomain(deps, actor, siteId, hostname, settings),
});

export const removeDomain = defineOperation({
  name: 'remove_domain',
  description: 'Remove a custom domain from a site; it stops being served at once',
  permission: 'WRITE',
  destructive: true,
  input: DomainParams,
  output: z.object({ deleted: z.literal(true) }),
  run: (deps, actor, input) => domains.removeDomain(deps, actor, input.siteId, input.hostname),
});
