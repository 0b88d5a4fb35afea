// Serves hosted sites: /web files by path with conditional and range requests, a custom 404.html,
// the private-site gate, and the platform's /_berth/* routes. /api/<name> has a lean path of its own
// (function-endpoint.ts), chosen in server.ts by functionSegments.
import Koa from 'koa';
import rangeParser from 'range-parser';
import { BerthError } from '../errors.ts';
import type { Deps } from '../services/deps.ts';
import type { CachedSite, CachedWebFile } from '../services/hosting-cache.ts';
import { resolveSite, resolveWebFile, smallBody, streamBody } from '../services/hosting.ts';
import { errorEnvelope } from './middleware/errors.ts';
import { requestContext } from './middleware/request-context.ts';
import { applyProxySetting } from './proxy.ts';
import { SESSION_COOKIE } from './function-endpoint.ts';
import { sessionCookie, sitePath } from './session-cookies.ts';
import { badRequestPage, linkExpiredPage, noSitePage, notFoundPage, notMemberPage, privateSitePage } from './pages.ts';
import { endSiteSession, exchangeSiteToken, siteReader } from '../services/site-sessions.ts';

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

function sendPage(ctx: Koa.Context, status: number, html: string): void {
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.set('Cache-Control', 'no-store');
  ctx.body = html;
}

/** The decoded URL path's segments, or null when it is not a clean path (traversal, NUL, "//"). */
export function webSegments(urlPath: string): string[] | null {
  const segments = urlPath.split('/').slice(1).map((segment) => decodeURIComponent(segment));
  const last = segments.length - 1;
  for (const [i, segment] of segments.entries()) {
    if (segment === '' && i !== last) return null;
    if (segment === '.' || segment === '..' || /[\\/\u0000-\u001f\u007f]/.test(segment)) return null;
  }
  return segments;
}

async function sendFile(ctx: Koa.Context, deps: Deps, file: CachedWebFile, status = 200): Promise<void> {
  ctx.status = status;
  ctx.set('Content-Type', file.contentType);
  ctx.set('X-Content-Type-Options', 'nosniff');
  if (status !== 200) {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = (await smallBody(deps, file)) ?? streamBody(deps, file);
    return;
  }
  // no-cache: browsers may keep a copy but must revalidate, so a new upload shows on the next request.
  ctx.set('Cache-Control', 'public, no-cache');
  ctx.set('Accept-Ranges', 'bytes');
  ctx.set('ETag', file.etag);
  ctx.set('Last-Modified', file.lastModified);
  if (ctx.fresh) {
    ctx.status = 304;
    return;
  }

  let range: { start: number; end: number } | undefined;
  const rangeHeader = ctx.get('Range');
  const ifRange = ctx.get('If-Range');
  if (rangeHeader && (!ifRange || ifRange === file.etag)) {
    const ranges = rangeParser(file.bytes, rangeHeader, { combine: true });
    if (ranges === -1) {
      ctx.status = 416;
      ctx.set('Content-Range', `bytes */${file.bytes}`);
      ctx.body = '';
      return;
    }
    // One range is served as 206; several are answered with the whole file, as RFC 9110 allows.
    if (ranges !== -2 && ranges.type === 'bytes' && ranges.length === 1) {
      range = ranges[0]!;
      ctx.status = 206;
      ctx.set('Content-Range', `bytes ${range.start}-${range.end}/${file.bytes}`);
    }
  }

  const length = range ? range.end - range.start + 1 : file.bytes;
  if (ctx.method === 'HEAD') {
    ctx.set('Content-Length', String(length));
    return;
  }
  const whole = await smallBody(deps, file);
  ctx.body = whole ? (range ? whole.subarray(range.start, range.end + 1) : whole) : streamBody(deps, file, range);
  ctx.length = length;
}

async function serveWeb(ctx: Koa.Context, deps: Deps, site: CachedSite, segments: string[]): Promise<void> {
  const wantsDirectory = segments.at(-1) === '';
  const relative = segments.join('/');
  const path = wantsDirectory ? `web/${relative}index.html` : `web/${relative}`;
  const file = await resolveWebFile(deps, site.bucketId, path);
  if (file) return sendFile(ctx, deps, file);

  // "/docs" where "web/docs/index.html" exists: send the browser to "/docs/" so relative links work.
  if (!wantsDirectory && (await resolveWebFile(deps, site.bucketId, `web/${relative}/index.html`))) {
    ctx.status = 308;
    ctx.redirect(`${ctx.path}/${ctx.querystring ? `?${ctx.querystring}` : ''}`);
    return;
  }

  const custom404 = await resolveWebFile(deps, site.bucketId, 'web/404.html');
  if (custom404) return sendFile(ctx, deps, custom404, 404);
  sendPage(ctx, 404, notFoundPage);
}

/** The control plane as the browser reaches it from this site: the public URL, or the site host without the subdomain. */
function controlPlaneOrigin(ctx: Koa.Context, deps: Deps): string {
  if (deps.config.publicUrl) return deps.config.publicUrl;
  const port = /:(\d+)$/.exec(ctx.host)?.[1];
  return `${ctx.protocol}://${deps.config.siteHost}${port ? `:${port}` : ''}`;
}

/**
 * The segments of a request URL under /api/ of a site, or null for any other path (served by the
 * hosting app, which also answers a path that is not clean). server.ts sends these to the functions.
 */
export function functionSegments(url = '/'): string[] | null {
  const path = (url.startsWith('/') ? url : new URL(url, 'http://x').pathname).split('?', 1)[0]!;
  if (!path.startsWith('/api/') && !path.toLowerCase().includes('%')) return null;
  let segments: string[] | null;
  try {
    segments = webSegments(path);
  } catch {
    return null;
  }
  return segments && segments[0] === 'api' && segments.length > 1 ? segments : null;
}

/** The platform's own routes on a site host: /_berth/session (sign-in) and /_berth/logout. */
async function berthRoute(ctx: Koa.Context, deps: Deps, site: CachedSite, route: string): Promise<void> {
  if (route === 'session' && ctx.method === 'GET') {
    let session: string;
    try {
      session = await exchangeSiteToken(deps, String(ctx.query.token ?? ''), site.id);
    } catch (err) {
      if (err instanceof BerthError) return sendPage(ctx, 400, linkExpiredPage);
      throw err;
    }
    // A cookie of this host only (no Domain): it is never sent to, nor valid on, another site.
    ctx.cookies.set(SESSION_COOKIE, session, sessionCookie(ctx.protocol));
    ctx.status = 303;
    return ctx.redirect(sitePath(ctx.query.next));
  }
  if (route === 'logout') {
    const token = ctx.cookies.get(SESSION_COOKIE);
    if (token) await endSiteSession(deps, token);
    ctx.cookies.set(SESSION_COOKIE, null, sessionCookie(ctx.protocol));
    ctx.status = 303;
    return ctx.redirect('/');
  }
  sendPage(ctx, 404, notFoundPage);
}

export function createHostingApp(deps: Deps): Koa {
  const app = new Koa();
  app.silent = true;
  applyProxySetting(app, deps.config);
  app.use(async (ctx, next) => {
    ctx.state.subdomain = siteSubdomain(ctx.host, deps.config.siteHost);
    await next();
  });
  app.use(requestContext(deps, 'site'));
  app.use(errorEnvelope(deps.log));
  app.use(async (ctx) => {
    const site = await resolveSite(deps, ctx.state.subdomain as string);
    if (!site || site.status !== 'ACTIVE') return sendPage(ctx, 404, noSitePage);

    let segments: string[] | null;
    try {
      segments = webSegments(ctx.path);
    } catch {
      return sendPage(ctx, 400, badRequestPage);
    }
    if (!segments) return sendPage(ctx, 400, badRequestPage);

    if (segments[0] === '_berth') return berthRoute(ctx, deps, site, segments.slice(1).join('/'));

    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      ctx.set('Allow', 'GET, HEAD');
      throw new BerthError('method_not_allowed', 'web files answer GET and HEAD only');
    }
    if (site.access === 'PRIVATE') {
      const token = ctx.cookies.get(SESSION_COOKIE);
      const reader = token ? await siteReader(deps, token, site) : null;
      if (reader === 'stranger') return sendPage(ctx, 403, notMemberPage);
      if (reader === null) {
        const next = ctx.querystring ? `${ctx.path}?${ctx.querystring}` : ctx.path;
        return sendPage(ctx, 401, privateSitePage(`${controlPlaneOrigin(ctx, deps)}/login?${new URLSearchParams({ site: site.id, next })}`));
      }
    }
    await serveWeb(ctx, deps, site, segments);
  });
  return app;
}
