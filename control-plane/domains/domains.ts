// Custom domains: a site's own hostnames, served once a TXT record proves that whoever added the name
// controls its DNS. Several sites may claim a name while it is PENDING; verifying makes one claim
// ACTIVE and drops the others, and an ACTIVE name is nobody else's to claim (domain_taken, with nothing
// said of the site that holds it). An ACTIVE domain whose record has gone is looked for again every
// BERTH_DOMAIN_CHECK_MS and lapses to PENDING after BERTH_DOMAIN_GRACE_MS: a name that changed hands
// does not stay with its old site.
import crypto from 'node:crypto';
import { isUniqueViolation } from '../db/errors.ts';
import { lockName } from '../db/locks.ts';
import { BerthError, conflict, notFound } from '../errors.ts';
import { customDomainName, normaliseHostname } from './domain-names.ts';
import { txtRecords } from './dns-records.ts';
import { type Actor, type Deps, timestamp } from '../deps.ts';
import { type PageRequest, paginate } from '../services/pagination.ts';
import { requireSite } from '../services/site-rows.ts';
import { type CertificateState, certificateStates } from './certificate-state.ts';

export const CHALLENGE_LABEL = '_berth-challenge';

/** Names one site may hold, ACTIVE and PENDING together: plenty for a site, bounded for the metadata. */
export const MAX_DOMAINS_PER_SITE = 100;

interface DomainRow {
  site_id: string;
  hostname: string;
  status: 'PENDING' | 'ACTIVE';
  verification_value: string;
  canonical: boolean | number;
  redirect_subdomain: boolean | number;
  created_at: string;
  verified_at: string | null;
  checked_at: string | null;
  failing_since: string | null;
}

export const challengeName = (hostname: string) => `${CHALLENGE_LABEL}.${hostname}`;

/** A domain as callers see it; `siteHostname` is where its own DNS should point (a CNAME, or the same addresses). */
function toDomain(row: DomainRow, siteHostname: string) {
  return {
    hostname: row.hostname,
    siteId: row.site_id,
    status: row.status,
    verification: { type: 'TXT' as const, name: challengeName(row.hostname), value: row.verification_value },
    target: siteHostname,
    canonical: Boolean(row.canonical),
    redirectSubdomain: Boolean(row.redirect_subdomain),
    createdAt: row.created_at,
    verifiedAt: row.verified_at,
    checkedAt: row.checked_at,
    failingSince: row.failing_since,
  };
}

const reservedNames = (deps: Deps) => ({
  siteHost: deps.config.siteHost,
  instanceHost: deps.config.publicUrl ? new URL(deps.config.publicUrl).hostname : '',
});

/** A domain of the site by the name in a URL, written any way that normalises to it. */
async function requireDomain(deps: Deps, siteId: string, hostname: string): Promise<DomainRow> {
  let name: string;
  try {
    name = normaliseHostname(hostname);
  } catch {
    throw notFound('domain');
  }
  const row = await deps.db<DomainRow>('site_domains').where({ site_id: siteId, hostname: name }).first();
  if (!row) throw notFound('domain');
  return row;
}

const siteHostnameOf = (deps: Deps, site: { subdomain: string }) => `${site.subdomain}.${deps.config.siteHost}`;

/**
 * Adds each domain's certificate state when Berth gets certificates itself (BERTH_TLS=acme); with a
 * proxy in front, the proxy's certificates are not Berth's to report.
 */
async function withCertificates<D extends { hostname: string }>(
  deps: Deps,
  domains: D[],
): Promise<Array<D & { certificate?: CertificateState }>> {
  if (!deps.config.tls) return domains;
  const states = await certificateStates(
    deps,
    domains.map((d) => d.hostname),
  );
  return domains.map((d) => ({ ...d, certificate: states.get(d.hostname)! }));
}

export async function listDomains(deps: Deps, actor: Actor, siteId: string, page: PageRequest) {
  const site = await requireSite(deps, actor, siteId);
  const query = deps.db('site_domains').where({ site_id: siteId }).orderBy('hostname');
  const { items, pagination } = await paginate(query, page, (row: DomainRow) =>
    toDomain(row, siteHostnameOf(deps, site)),
  );
  return { domains: await withCertificates(deps, items), pagination };
}

export async function getDomain(deps: Deps, actor: Actor, siteId: string, hostname: string) {
  const site = await requireSite(deps, actor, siteId);
  const [domain] = await withCertificates(deps, [
    toDomain(await requireDomain(deps, siteId, hostname), siteHostnameOf(deps, site)),
  ]);
  return { domain: domain! };
}

export async function addDomain(deps: Deps, actor: Actor, siteId: string, input: { hostname: string }) {
  const site = await requireSite(deps, actor, siteId);
  const hostname = customDomainName(input.hostname, reservedNames(deps));
  const claims = await deps.db<DomainRow>('site_domains').where({ hostname }).select('site_id', 'status');
  if (claims.some((claim) => claim.site_id === siteId)) {
    throw conflict('domain_taken', `${hostname} is a domain of this site already`);
  }
  if (claims.some((claim) => claim.status === 'ACTIVE')) throw taken(hostname);
  const [{ count }] = (await deps.db('site_domains').where({ site_id: siteId }).count({ count: '*' })) as [
    { count: number | string },
  ];
  if (Number(count) >= MAX_DOMAINS_PER_SITE) {
    throw new BerthError(
      'domain_limit_reached',
      `a site has at most ${MAX_DOMAINS_PER_SITE} domains; remove one it no longer needs first`,
    );
  }
  const row: DomainRow = {
    site_id: siteId,
    hostname,
    status: 'PENDING',
    verification_value: `berth-site-verification=${crypto.randomBytes(18).toString('base64url')}`,
    canonical: false,
    redirect_subdomain: false,
    created_at: timestamp(deps),
    verified_at: null,
    checked_at: null,
    failing_since: null,
  };
  try {
    await deps.db('site_domains').insert(row);
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict('domain_taken', `${hostname} is a domain of this site already`);
    throw err;
  }
  return { domain: toDomain(row, siteHostnameOf(deps, site)) };
}

const taken = (hostname: string) =>
  conflict(
    'domain_taken',
    `${hostname} is in use by another site of this instance; it can be added once it is released`,
  );

/** Whether the name's challenge record holds the value; what was found instead when not. */
type Seen = { found: true } | { found: false; instead: string; resolverFailed?: true };

async function lookFor(deps: Deps, row: DomainRow): Promise<Seen> {
  const name = challengeName(row.hostname);
  const answer = await txtRecords(deps.config.dnsServers, name);
  if ('failed' in answer) return { found: false, instead: answer.failed, resolverFailed: true };
  if (answer.records.includes(row.verification_value)) return { found: true };
  if (answer.records.length === 0) return { found: false, instead: `there is no TXT record at ${name}` };
  const shown = answer.records.slice(0, 5).map((value) => JSON.stringify(value.slice(0, 100)));
  return { found: false, instead: `the TXT records at ${name} are ${shown.join(', ')}, not the value asked for` };
}

export async function verifyDomain(deps: Deps, actor: Actor, siteId: string, hostname: string) {
  await requireSite(deps, actor, siteId);
  const row = await requireDomain(deps, siteId, hostname);
  const seen = await lookFor(deps, row);
  if (!seen.found) {
    throw new BerthError(
      'domain_not_verified',
      `${row.hostname} is not verified: ${seen.instead}. Create a TXT record named ${challengeName(row.hostname)} with the value ${row.verification_value}; DNS changes may take a few minutes to be seen.`,
      { name: challengeName(row.hostname), value: row.verification_value },
    );
  }
  const now = timestamp(deps);
  const activated = row.status !== 'ACTIVE';
  try {
    await deps.db.transaction(async (trx) => {
      // Verifications of one name take turns (two sites' claims may both be proven at once).
      await lockName(trx, `site-domain:${row.hostname}`);
      // The record proves this claim: the other sites' pending claims of the name end here.
      await trx('site_domains').where({ hostname: row.hostname }).whereNot({ site_id: siteId }).delete();
      await trx('site_domains')
        .where({ site_id: siteId, hostname: row.hostname })
        .update({
          status: 'ACTIVE',
          verified_at: activated ? now : row.verified_at,
          checked_at: now,
          failing_since: null,
        });
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw taken(row.hostname);
    throw err;
  }
  if (activated) await deps.changes.publish({ kind: 'domains' });
  return getDomain(deps, actor, siteId, row.hostname);
}

export interface DomainSettings {
  canonical?: boolean | undefined;
  redirectSubdomain?: boolean | undefined;
}

/** Makes a domain the site's canonical name (the others answer 308 to it), or stops it being one. */
export async function updateDomain(deps: Deps, actor: Actor, siteId: string, hostname: string, input: DomainSettings) {
  await requireSite(deps, actor, siteId);
  const row = await requireDomain(deps, siteId, hostname);
  const canonical = input.canonical ?? Boolean(row.canonical);
  const redirectSubdomain = canonical && (input.redirectSubdomain ?? Boolean(row.redirect_subdomain));
  if (input.redirectSubdomain && !canonical) {
    throw new BerthError('invalid_request', 'only the canonical domain can take the subdomain’s visitors');
  }
  await deps.db.transaction(async (trx) => {
    if (canonical) {
      await trx('site_domains')
        .where({ site_id: siteId })
        .whereNot({ hostname: row.hostname })
        .update({ canonical: false, redirect_subdomain: false });
    }
    await trx('site_domains')
      .where({ site_id: siteId, hostname: row.hostname })
      .update({ canonical, redirect_subdomain: redirectSubdomain });
  });
  await deps.changes.publish({ kind: 'domains' });
  return getDomain(deps, actor, siteId, row.hostname);
}

export async function removeDomain(deps: Deps, actor: Actor, siteId: string, hostname: string) {
  await requireSite(deps, actor, siteId);
  const row = await requireDomain(deps, siteId, hostname);
  await deps.db('site_domains').where({ site_id: siteId, hostname: row.hostname }).delete();
  await deps.changes.publish({ kind: 'domains' });
  return { deleted: true as const };
}

export interface RecheckReport {
  checked: number;
  lapsed: number;
}

/**
 * Looks again for the record of each ACTIVE domain not checked for `domainCheckMs`. Each is claimed
 * by moving its checked_at first, so nodes running this together look each name up once.
 */
export async function recheckDomains(deps: Deps, batch = 100): Promise<RecheckReport> {
  const { domainCheckMs, domainGraceMs } = deps.config;
  const now = deps.now();
  const due = new Date(now.getTime() - domainCheckMs).toISOString();
  const rows = await deps
    .db<DomainRow>('site_domains')
    .where({ status: 'ACTIVE' })
    .andWhere((q) => void q.whereNull('checked_at').orWhere('checked_at', '<', due))
    .orderBy('checked_at')
    .limit(batch);
  let checked = 0;
  let lapsed = 0;
  for (const row of rows) {
    const claimed = await deps
      .db('site_domains')
      .where({ site_id: row.site_id, hostname: row.hostname, status: 'ACTIVE' })
      .andWhere(
        (q) => void (row.checked_at === null ? q.whereNull('checked_at') : q.where('checked_at', row.checked_at)),
      )
      .update({ checked_at: now.toISOString() });
    if (claimed === 0) continue;
    checked++;
    const seen = await lookFor(deps, row);
    // A resolver that fails says nothing about the record: only a clear "not there" counts against it.
    if (seen.found || seen.resolverFailed) {
      if (seen.found && row.failing_since) {
        await deps
          .db('site_domains')
          .where({ site_id: row.site_id, hostname: row.hostname })
          .update({ failing_since: null });
      }
      continue;
    }
    const failingSince = row.failing_since ?? now.toISOString();
    const lapses = now.getTime() - new Date(failingSince).getTime() >= domainGraceMs;
    await deps
      .db('site_domains')
      .where({ site_id: row.site_id, hostname: row.hostname })
      .update(lapses ? { status: 'PENDING', failing_since: failingSince } : { failing_since: failingSince });
    if (lapses) {
      lapsed++;
      // Every node stops serving it now, not once the round is over.
      await deps.changes.publish({ kind: 'domains' });
      deps.log.warn(
        { siteId: row.site_id, hostname: row.hostname },
        'a custom domain’s TXT record has been missing past the grace period: it is PENDING again and no longer served',
      );
    }
  }
  return { checked, lapsed };
}
