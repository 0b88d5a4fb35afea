// What a finished request to a site counts in the site's analytics (control-plane/analytics/): its
// status, duration and path, the bytes sent for it, and the host of an outside page that linked to it.
// Nothing that tells visitors apart is kept: no address, no cookie, no full referrer. A preview's
// requests are not the site's traffic and are not counted.
import type http from 'node:http';
import type { Deps } from '../deps.ts';
import { cachedSite, resolveSite } from '../services/hosting.ts';
import { requestHost } from './proxy.ts';

/** A host name is at most 253 characters; a longer "referrer" is not one. */
const MAX_HOST_CHARS = 253;

/** What the connection had sent when the request arrived: the answer's bytes are what it sends after. */
export const sentBefore = (req: http.IncomingMessage): number => req.socket?.bytesWritten ?? 0;

/**
 * Counts a request of the site at `subdomain` once its answer has left: at once when it is written
 * whole (a file, a page), when the connection is done with it when it streams.
 */
export function countSiteRequest(
  deps: Deps,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  subdomain: string,
  path: string,
  ms: number,
  sent: number,
): void {
  const count = () => {
    const bytes = Math.max(0, (req.socket?.bytesWritten ?? sent) - sent);
    const referrer = referrerHost(req, deps.config.trustProxy);
    const status = res.statusCode;
    const record = (siteId: string) => deps.analytics.request(siteId, status, bytes, ms, path, referrer);
    // The request looked its site up a moment ago: it is cached unless a change just made it forget.
    const site = cachedSite(deps, subdomain);
    if (site) record(site.id);
    else if (site === undefined)
      void resolveSite(deps, subdomain).then(
        (found) => found && record(found.id),
        () => {},
      );
  };
  if (res.writableEnded) count();
  else res.once('close', count);
}

/** The host of the page that linked here, when it is another host's. */
function referrerHost(req: http.IncomingMessage, trustProxy: boolean): string | null {
  const referer = req.headers.referer;
  if (!referer) return null;
  const host = URL.parse(referer)?.hostname;
  if (!host || host.length > MAX_HOST_CHARS) return null;
  const own = requestHost(req, trustProxy).toLowerCase();
  const ownName = own.startsWith('[') ? own.slice(0, own.indexOf(']') + 1) : own.split(':')[0];
  return host === ownName ? null : host;
}
