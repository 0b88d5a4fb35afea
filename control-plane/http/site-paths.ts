// How a request on a site's host is routed: /api/… to the function path, everything else but /_berth/…
// to the web-file path (both on Node's own request and response, the hot paths; the site's rules may
// send any method on to a function), and the rest (the platform's /_berth routes, paths that are not
// clean) to the Koa hosting app.
import type http from 'node:http';
import { requestHost, requestProtocol } from './proxy.ts';

/** What makes a path that needs no decoding unclean: a backslash or control character, "//", "/." or "/..". */
const UNCLEAN_PLAIN_PATH = /[\\\u0000-\u001f\u007f]|\/\/|\/\.\.?(?:\/|$)/;

/** The decoded URL path's segments, or null when it is not a clean path (traversal, NUL, "//"). */
export function webSegments(urlPath: string): string[] | null {
  // Most paths have nothing to decode: one test of the whole path says what the loop below would.
  if (!urlPath.includes('%')) return UNCLEAN_PLAIN_PATH.test(urlPath) ? null : urlPath.slice(1).split('/');
  const segments = urlPath
    .split('/')
    .slice(1)
    .map((segment) => decodeURIComponent(segment));
  const last = segments.length - 1;
  for (const [i, segment] of segments.entries()) {
    if (segment === '' && i !== last) return null;
    if (segment === '.' || segment === '..' || /[\\/\u0000-\u001f\u007f]/.test(segment)) return null;
  }
  return segments;
}

/** The path of a request URL, origin-form or absolute-form, without its query. */
export const urlPath = (url = '/'): string =>
  (url.startsWith('/') ? url : new URL(url, 'http://x').pathname).split('?', 1)[0]!;

/**
 * 308 to a site's canonical name, path and query kept (and the port, when the request named one).
 * Browsers keep a 308 for as long as they are told: a few minutes, so a change of the canonical name
 * reaches them soon.
 */
export function redirectToCanonical(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  hostname: string,
  trustProxy: boolean,
): void {
  const port = /:(\d+)$/.exec(requestHost(req, trustProxy))?.[1];
  const location = `${requestProtocol(req, trustProxy)}://${hostname}${port ? `:${port}` : ''}${req.url ?? '/'}`;
  res.writeHead(308, { location, 'cache-control': 'max-age=300', 'content-length': '0' });
  res.end();
}

export type SiteRoute = { to: 'function' | 'files'; segments: string[] } | { to: 'app' };

export function siteRoute(req: http.IncomingMessage): SiteRoute {
  let segments: string[] | null;
  try {
    segments = webSegments(urlPath(req.url));
  } catch {
    segments = null;
  }
  if (!segments) return { to: 'app' };
  if (segments[0] === 'api' && segments.length > 1) return { to: 'function', segments };
  if (segments[0] !== '_berth') return { to: 'files', segments };
  return { to: 'app' };
}
