// Which names this instance serves, the one answer for certificates (tls/) and a proxy's on-demand TLS
// check: a name that gets a yes may cost a certificate order, so a name anyone can make up gets a no.
import type { Deps } from './deps.ts';
import { resolveSite } from './hosting.ts';
import { previewCertificateAllowed } from './preview-certificates.ts';
import { isInstantLabel, resolvePreview } from './previews.ts';
import { hostName } from './site-names.ts';

/**
 * Whether this instance serves a name, for certificates (tls/) and a proxy's on-demand TLS check: its
 * own host, the subdomain of an ACTIVE site, an ACTIVE custom domain of an ACTIVE site, or the preview
 * host of a deployment it shows while the weekly cap of preview certificates allows it
 * (preview-certificates.ts). Anything else, an instant's preview host included (any instant names
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
