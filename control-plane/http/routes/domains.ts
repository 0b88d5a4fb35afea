import * as domains from '../../operations/domains.ts';
import type { OperationRoute } from '../route.ts';

export const domainRoutes: OperationRoute[] = [
  {
    operation: domains.listDomains,
    method: 'GET',
    path: '/v0/sites/:siteId/domains',
    operationId: 'listDomains',
    tag: 'Domains',
    ok: 'a page of the site’s custom domains',
  },
  {
    operation: domains.addDomain,
    method: 'POST',
    path: '/v0/sites/:siteId/domains',
    operationId: 'addDomain',
    tag: 'Domains',
    status: 201,
    ok: 'the new PENDING domain, with the TXT record to create',
    errors: {
      400: {
        description: 'not a public DNS name (code "invalid_hostname") or one of the instance’s own ("domain_reserved")',
      },
      409: { description: 'the name is another site’s, or this site’s already (code "domain_taken")' },
      422: { description: 'the site holds 100 domains already (code "domain_limit_reached")' },
    },
  },
  {
    operation: domains.getDomain,
    method: 'GET',
    path: '/v0/sites/:siteId/domains/:hostname',
    operationId: 'getDomain',
    tag: 'Domains',
    ok: 'the domain',
  },
  {
    operation: domains.updateDomain,
    method: 'POST',
    path: '/v0/sites/:siteId/domains/:hostname',
    operationId: 'updateDomain',
    tag: 'Domains',
    ok: 'the updated domain',
  },
  {
    operation: domains.verifyDomain,
    method: 'POST',
    path: '/v0/sites/:siteId/domains/:hostname/verify',
    operationId: 'verifyDomain',
    tag: 'Domains',
    ok: 'the domain, ACTIVE',
    errors: {
      409: {
        description:
          'the TXT record was not found (code "domain_not_verified", saying what was found instead), or another site verified the name first ("domain_taken")',
      },
    },
  },
  {
    operation: domains.removeDomain,
    method: 'DELETE',
    path: '/v0/sites/:siteId/domains/:hostname',
    operationId: 'removeDomain',
    tag: 'Domains',
    ok: 'deleted',
  },
];
