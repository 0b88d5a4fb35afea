// How a request on a site's host is routed: /api/… to the function path, GET and HEAD of everything
// else but /_berth/… to the web-file path (both on Node's own request and response, the hot paths),
// and the rest (the platform's /_berth routes, other methods, paths that are not clean) to the Koa
// hosting app.
import type http from 'node:http';

/**
 * The subdomain a Host header names under the site host, or null for the control plane.
 * "blog.localhost:8080" → "blog"; "localhost:8080" and "127.0.0.1" → null.
 */
export function siteSubdomain(host: string | undefined, siteHost: string): string | null {
  if (!host) return null;
  const name = host.toLowerCase().replace(/:\d+$/, '').replace(/\.$/, '');
  const suffix = `.${siteHost}`;
  if (!name.endsWith(suffix)) return null;
  return name.slice(0, -suffix.length);
}

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
  if ((req.method === 'GET' || req.method === 'HEAD') && segments[0] !== '_berth') return { to: 'files', segments };
  return { to: 'app' };
}
