// The Koa side of a site's host: the platform's own /_berth routes (a PRIVATE site's sign-in and
// sign-out), and paths that are not clean (400). Web files with the site's rules (site-files.ts) and
// /api/<name> (function-endpoint.ts) have lean paths of their own, chosen in server.ts by siteRoute.
import Koa from 'koa';
import { BerthError } from '../errors.ts';
import type { Deps } from '../deps.ts';
import type { CachedSite } from '../services/hosting-cache.ts';
import { resolveSite } from '../services/hosting.ts';
import { resolvePreview } from '../deployments/previews.ts';
import { errorEnvelope } from './middleware/errors.ts';
import { requestContext } from './middleware/request-context.ts';
import { applyProxySetting } from './proxy.ts';
import { SESSION_COOKIE, sessionCookie, sitePath } from './session-cookies.ts';
import { badRequestPage, forbiddenPage, linkExpiredPage, noSitePage, notFoundPage, signOutPage } from './pages.ts';
import { readForm, sameOrigin } from './forms.ts';
import { csrfToken } from '../services/sessions.ts';
import { safeEqual } from '../services/safe-equal.ts';
import { endSiteSession, exchangeSiteToken } from '../services/site-sessions.ts';
import { webSegments } from './site-paths.ts';

function sendPage(ctx: Koa.Context, status: number, html: string): void {
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.set('Cache-Control', 'no-store');
  ctx.body = html;
}

/** The platform's own routes on a site host: /_berth/session (sign-in) and /_berth/logout (sign-out). */
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
  if (route === 'logout') return signOut(ctx, deps);
  sendPage(ctx, 404, notFoundPage);
}

/** The page of the sign-out form, which allows nothing but posting it to this host. */
const SIGN_OUT_CSP =
  "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/**
 * GET /_berth/logout shows a button; POST signs out, with the session's anti-forgery token from that
 * page (which pages of other sites cannot read) and not from another site's page (its Origin).
 */
async function signOut(ctx: Koa.Context, deps: Deps): Promise<void> {
  const token = ctx.cookies.get(SESSION_COOKIE) ?? null;
  if (ctx.method === 'GET' || ctx.method === 'HEAD') {
    ctx.set({
      'Content-Security-Policy': SIGN_OUT_CSP,
      'Referrer-Policy': 'same-origin',
      'X-Content-Type-Options': 'nosniff',
    });
    return sendPage(ctx, 200, signOutPage(token === null ? null : csrfToken(deps, token)));
  }
  if (ctx.method !== 'POST') {
    ctx.set('Allow', 'GET, HEAD, POST');
    throw new BerthError('method_not_allowed', 'sign out with the form at GET /_berth/logout');
  }
  sameOrigin(ctx);
  if (token !== null) {
    if (!safeEqual((await readForm(ctx, deps)).csrf ?? '', csrfToken(deps, token))) {
      return sendPage(ctx, 403, forbiddenPage);
    }
    await endSiteSession(deps, token);
  }
  ctx.cookies.set(SESSION_COOKIE, null, sessionCookie(ctx.protocol));
  ctx.status = 303;
  ctx.redirect('/');
}

export function createHostingApp(deps: Deps): Koa {
  const app = new Koa();
  app.silent = true;
  applyProxySetting(app, deps.config);
  app.use(async (ctx, next) => {
    const to = await deps.siteNames.route(ctx.host);
    ctx.state.subdomain = to.to === 'site' || to.to === 'redirect' ? to.subdomain : null;
    ctx.state.preview = to.to === 'site' ? to.preview : undefined;
    await next();
  });
  app.use(requestContext(deps, 'site'));
  app.use(errorEnvelope(deps.log));
  app.use(async (ctx) => {
    const subdomain = ctx.state.subdomain as string | null;
    const site = subdomain === null ? null : await resolveSite(deps, subdomain);
    if (site?.status !== 'ACTIVE') return sendPage(ctx, 404, noSitePage);
    // A preview host is the site's (its sign-in included) only while its label shows something.
    const preview = ctx.state.preview as string | undefined;
    if (preview !== undefined && !(await resolvePreview(deps, site, preview))) return sendPage(ctx, 404, noSitePage);

    let segments: string[] | null;
    try {
      segments = webSegments(ctx.path);
    } catch {
      return sendPage(ctx, 400, badRequestPage);
    }
    if (!segments) return sendPage(ctx, 400, badRequestPage);

    if (segments[0] === '_berth') return berthRoute(ctx, deps, site, segments.slice(1).join('/'));
    // Every other clean path is the web files' (site-files.ts), which siteRoute chose before this app.
    sendPage(ctx, 404, notFoundPage);
  });
  return app;
}
