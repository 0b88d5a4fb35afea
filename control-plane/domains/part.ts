// The domains' part of a start: the host router (which site a Host names: subdomains, previews and the
// ACTIVE custom domains, following the change feed) and the periodic check of custom domains' records.
import { opened, type Part } from '../part.ts';
import { DomainChecks } from './domain-checks.ts';
import { SiteNames } from './site-names.ts';

export const domainsPart: Part = {
  name: 'the custom domains',
  async open(deps, { config, log, stack }) {
    const { db } = opened(deps, 'the custom domains', 'db');
    const siteNames = new SiteNames(
      db,
      { siteHost: config.siteHost, instanceHost: config.publicUrl ? new URL(config.publicUrl).hostname : '' },
      log,
    );
    await siteNames.start();
    stack.defer('the custom domains', () => siteNames.stop());
    return { siteNames };
  },
  listens: (deps) => [deps.siteNames],
  start(deps, stack) {
    stack.started('the domain checks', new DomainChecks(deps));
  },
};
