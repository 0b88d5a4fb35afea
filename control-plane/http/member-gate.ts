// The gate of what only the account's members may read on a site's host: a PRIVATE site's web files,
// and everything a preview host shows (its files and its functions) unless the owner made that
// deployment's preview PUBLIC. A member reads on; anyone else gets the sign-in page (401), which comes
// back to the host they asked, or a signed-in stranger the 403 page.
import type http from 'node:http';
import type { Deps } from '../deps.ts';
import type { CachedSite } from '../services/hosting-cache.ts';
import { siteReader } from '../services/site-sessions.ts';
import { hostName } from '../domains/site-names.ts';
import { previewOf } from '../services/subdomains.ts';
import { sendHtml } from './bare-response.ts';
import { notMemberPage, privateSitePage } from './pages.ts';
import { requestHost, requestProtocol, servedOrigin } from './proxy.ts';
import { SESSION_COOKIE } from './session-cookies.ts';
import { urlPath } from './site-paths.ts';

/** Whether a member of the site's account asks; if not, the answer (401 or 403) has been sent. */
export async function mayRead(
  deps: Deps,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  site: CachedSite,
  requestId: string,
): Promise<boolean> {
  const token = cookie(req, SESSION_COOKIE);
  const reader = token ? await siteReader(deps, token, site) : null;
  if (reader === 'member') return true;
  if (reader === 'stranger') {
    sendHtml(res, 403, notMemberPage, requestId);
    return false;
  }
  const url = req.url ?? '/';
  const at = url.indexOf('?');
  const next = at === -1 ? urlPath(url) : `${urlPath(url.slice(0, at))}${url.slice(at)}`;
  sendHtml(
    res,
    401,
    privateSitePage(
      `${controlPlaneOrigin(deps, req)}/login?${new URLSearchParams(signInReturn(deps, req, site, next))}`,
    ),
    requestId,
  );
  return false;
}

/**
 * Where sign-in sends the browser back to: the site and path, and the host it came to when that is not
 * the site's subdomain (a custom domain or a preview host), at the scheme and port the site is served at.
 */
function signInReturn(deps: Deps, req: http.IncomingMessage, site: CachedSite, next: string): Record<string, string> {
  const host = requestHost(req, deps.config.trustProxy);
  const suffix = `.${deps.config.siteHost}`;
  const name = hostName(host);
  if (name.endsWith(suffix) && !previewOf(name.slice(0, -suffix.length))) return { site: site.id, next };
  const proxied = { protocol: requestProtocol(req, deps.config.trustProxy), host };
  return { site: site.id, next, origin: servedOrigin(deps, name, proxied) };
}

/** A cookie's raw value from the request, the first of that name. */
function cookie(req: http.IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at !== -1 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}

/** The control plane as the browser reaches it from this site: the public URL, or the site host without the subdomain. */
function controlPlaneOrigin(deps: Deps, req: http.IncomingMessage): string {
  if (deps.config.publicUrl) return deps.config.publicUrl;
  const port = /:(\d+)$/.exec(requestHost(req, deps.config.trustProxy))?.[1];
  return `${requestProtocol(req, deps.config.trustProxy)}://${deps.config.siteHost}${port ? `:${port}` : ''}`;
}
