// Which names this instance serves, the one answer for certificates (tls/) and a proxy's on-demand TLS
// check: a name that gets a yes may cost a certificate order, so a name anyone can make up gets a no.
import { lockName } from '../db/locks.ts';
import type { Deps } from '../deps.ts';
import { resolveSite } from '../services/hosting.ts';
import { isInstantLabel, resolvePreview } from '../deployments/previews.ts';
import { hostName } from './site-names.ts';

/**
 * Whether this instance serves a name, for certificates (tls/) and a proxy's on-demand TLS check: its
 * own host, the subdomain of an ACTIVE site, an ACTIVE custom domain of an ACTIVE site, or the preview
 * host of a deployment it shows while the weekly cap of preview certificates allows it
 * (below). Anything else, an instant's preview host included (any instant names
 * one), gets no certificate and costs no order.
 */
export async function servesName(deps: Deps, name: string): Promise<boolean> {
  const hostname = hostName(name);
  if (!hostname) return false;
  const { siteHost, publicUrl } = deps.config;
  if (hostname === siteHost || (publicUrl && hostname === new URL(publicUrl).hostname)) return true;
  const route = await deps.siteNames.route(hostname);
  if (route.to === 'control' || route.to === 'unknown' || !route.subdomain || route.subdomain.includes('.'))
    return false;
  const site = await resolveSite(deps, route.subdomain);
  if (site?.status !== 'ACTIVE') return false;
  if (route.to === 'site' && route.preview !== undefined)
    return (
      !isInstantLabel(route.preview) &&
      (await resolvePreview(deps, site, route.preview)) !== null &&
      (await previewCertificateAllowed(deps, hostname))
    );
  return true;
}

// The weekly cap of preview hosts that get a certificate. A site's host and its verified domains get
// theirs whenever they need one; a preview host (`<id>--<sub>.<site host>`) is made by every
// deployment, so one tenant deploying in a loop could spend the CA's weekly certificates for the whole
// registered domain. At most BERTH_TLS_PREVIEW_CERTIFICATES_PER_WEEK preview hosts are granted one in
// any 7 days, for the whole instance (every node counts the same rows); a name granted once keeps its
// grant, for its renewals, until the grant is 90 days old.

const WEEK_MS = 7 * 24 * 3600_000;
/** A grant this old is forgotten: the certificate it was for (90 days at Let's Encrypt) has ended. */
const GRANT_KEPT_MS = 90 * 24 * 3600_000;
/** How long a node, having found the week's grants all given, answers no without asking the metadata. */
const FULL_REMEMBERED_MS = 60_000;

const fullUntil = new WeakMap<object, number>();

/** Whether the preview host may have a certificate: granted already, or granted now within the cap. */
export async function previewCertificateAllowed(
  deps: Pick<Deps, 'db' | 'now' | 'config' | 'log'>,
  hostname: string,
): Promise<boolean> {
  if (await deps.db('preview_certificates').where({ hostname }).first('hostname')) return true;
  const now = deps.now().getTime();
  if ((fullUntil.get(deps.db) ?? 0) > now) return false;
  const granted = await deps.db.transaction(async (trx) => {
    // Nodes take turns, so two of them cannot both give the week's last grant.
    await lockName(trx, 'preview-certificates');
    if (await trx('preview_certificates').where({ hostname }).first('hostname')) return true;
    await trx('preview_certificates')
      .where('granted_at', '<', new Date(now - GRANT_KEPT_MS).toISOString())
      .delete();
    const [row] = await trx('preview_certificates')
      .where('granted_at', '>', new Date(now - WEEK_MS).toISOString())
      .count({ count: '*' });
    if (Number(row?.count ?? 0) >= deps.config.previewCertificatesPerWeek) return false;
    await trx('preview_certificates').insert({ hostname, granted_at: new Date(now).toISOString() });
    return true;
  });
  if (!granted) {
    fullUntil.set(deps.db, now + FULL_REMEMBERED_MS);
    deps.log.warn(
      { hostname, perWeek: deps.config.previewCertificatesPerWeek },
      'a preview host gets no certificate: this week’s preview certificates are all given (BERTH_TLS_PREVIEW_CERTIFICATES_PER_WEEK)',
    );
  }
  return granted;
}
