// The browser side of the control-plane host: sign-in at /login (and back to a PRIVATE site), one-time
// links that set a password, invitations, sign-out, and /session for the dashboard. Pages are plain HTML
// under a strict Content-Security-Policy; a state-changing request from another site is refused by
// its Origin; the session cookie is HttpOnly, SameSite=Lax and `__Host-` where browsers allow it
// (session-cookies.ts).
import Router from '@koa/router';
import type Koa from 'koa';
import { BerthError } from '../errors.ts';
import { Uuid } from '../schemas.ts';
import type { Deps } from '../deps.ts';
import { safeEqual } from '../services/safe-equal.ts';
import { ABSOLUTE_MS, csrfToken, sessionUser, signIn, signOut } from '../services/sessions.ts';
import { SET_PASSWORD_PATH, openSignInLink, setPasswordWithLink } from '../services/sign-in-links.ts';
import { INVITATION_PATH, type OpenInvitation, acceptInvitation, openInvitation } from '../services/members.ts';
import { createSiteToken } from '../services/site-sessions.ts';
import { consoleSession, setConsoleSession, sitePath } from './session-cookies.ts';
import { escapeHtml } from './pages.ts';
import { readForm, sameOrigin } from './forms.ts';
import { servedOrigin } from './proxy.ts';

const CSP = "default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

function page(ctx: Koa.Context, status: number, title: string, body: string, csp = CSP): void {
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  // same-origin, not no-referrer: under no-referrer browsers send `Origin: null` with the form's own
  // POST, which sameOrigin() would refuse; other sites still get no referrer.
  ctx.set({
    'Content-Security-Policy': csp,
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'same-origin',
    'Cache-Control': 'no-store',
  });
  ctx.body = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(title)} · Berth</title></head><body><main>${body}</main></body></html>`;
}

/** A private site the browser came from, and the path it asked for there. */
interface SiteReturn {
  site?: string | undefined;
  next?: string | undefined;
  /** The site's custom domain or preview host the browser came from, when not its subdomain (only its name counts). */
  origin?: string | undefined;
}

function loginPage(
  ctx: Koa.Context,
  status: number,
  message = '',
  email = '',
  back: SiteReturn = {},
  siteHost = '',
): void {
  const hidden = Object.entries(back)
    .filter(([, value]) => typeof value === 'string')
    .map(([name, value]) => `<input type="hidden" name="${name}" value="${escapeHtml(value as string)}">`)
    .join('');
  page(
    ctx,
    status,
    'Sign in',
    `<h1>Sign in to Berth</h1>${message ? `<p role="alert">${escapeHtml(message)}</p>` : ''}
<form method="post" action="/login">${hidden}
<p><label for="email">Email</label><br><input id="email" name="email" type="email" autocomplete="username" required value="${escapeHtml(email)}"></p>
<p><label for="password">Password</label><br><input id="password" name="password" type="password" autocomplete="current-password" required></p>
<p><button type="submit">Sign in</button></p>
</form>`,
    // Signing in for a private site ends in a redirect to the site's host, which form-action governs too.
    back.site && siteHost
      ? CSP.replace(
          "form-action 'self'",
          `form-action 'self' *.${siteHost}:*${back.origin ? ` ${new URL(back.origin).hostname}:*` : ''}`,
        )
      : CSP,
  );
}

/** A new token at every sign-in: a session id planted before it is worth nothing after. */
function startSession(ctx: Koa.Context, signedIn: { token: string }): void {
  setConsoleSession(ctx, signedIn.token, ABSOLUTE_MS);
}

function setPasswordPage(ctx: Koa.Context, status: number, token: string, email: string, message = ''): void {
  page(
    ctx,
    status,
    'Set your password',
    `<h1>Set your password</h1>${email ? `<p>For ${escapeHtml(email)}.</p>` : ''}${message ? `<p role="alert">${escapeHtml(message)}</p>` : ''}
<form method="post" action="${SET_PASSWORD_PATH}">
<input type="hidden" name="token" value="${escapeHtml(token)}">
<p><label for="password">New password</label><br><input id="password" name="password" type="password" autocomplete="new-password" minlength="10" required></p>
<p><button type="submit">Set password</button></p>
</form>`,
  );
}

function siteReturn(values: Record<string, unknown>): SiteReturn {
  const site = typeof values.site === 'string' && Uuid.safeParse(values.site).success ? values.site : undefined;
  if (!site) return {};
  const origin = siteOrigin(values.origin);
  return { site, next: sitePath(values.next), ...(origin ? { origin } : {}) };
}

/** An http(s) origin and nothing more, or undefined; whether it is the site's is checked before use. */
function siteOrigin(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  try {
    const url = new URL(value);
    const bare = url.pathname === '/' && !url.search && !url.hash && !url.username && !url.password;
    return bare && (url.protocol === 'http:' || url.protocol === 'https:') ? url.origin : undefined;
  } catch {
    return undefined;
  }
}

/** Sends the browser to the private site's host with a single-use token for it. */
async function backToSite(ctx: Koa.Context, deps: Deps, userId: string, back: SiteReturn): Promise<void> {
  const site = await deps.db('sites').where({ id: back.site, status: 'ACTIVE' }).first('id', 'subdomain');
  if (!site) return page(ctx, 404, 'Site not found', '<h1>Site not found</h1><p>There is no such site.</p>');
  // Back to the custom domain the browser came from only when it is one of this site's, served now,
  // or to a preview host of this very site; anywhere else, to the site's subdomain.
  const hostname = back.origin ? new URL(back.origin).hostname : undefined;
  const domain = hostname ? await deps.siteNames.domain(hostname) : undefined;
  const to = hostname ? await deps.siteNames.route(hostname) : undefined;
  const preview = to?.to === 'site' && to.subdomain === site.subdomain ? to.preview : undefined;
  const name =
    domain?.siteId === site.id
      ? hostname!
      : `${preview === undefined ? site.subdomain : `${preview}--${site.subdomain}`}.${deps.config.siteHost}`;
  // The token goes to the scheme and port the site is served at, never those the origin asked for.
  const origin = servedOrigin(deps, name, { protocol: ctx.protocol, host: ctx.host });
  const token = await createSiteToken(deps, userId, site.id as string);
  ctx.status = 303;
  ctx.redirect(`${origin}/_berth/session?${new URLSearchParams({ token, next: back.next ?? '/' })}`);
}

function unusableLink(ctx: Koa.Context, err: BerthError): void {
  page(
    ctx,
    err.status,
    'Link expired',
    `<h1>This link cannot be used</h1><p role="alert">${escapeHtml(err.message)}</p>`,
  );
}

function invitationPage(
  ctx: Koa.Context,
  status: number,
  token: string,
  invitation: OpenInvitation,
  message = '',
): void {
  const [label, autocomplete] = invitation.hasPassword
    ? ['Password', 'current-password']
    : ['Choose a password', 'new-password'];
  page(
    ctx,
    status,
    'Join an account',
    `<h1>Join ${escapeHtml(invitation.accountName)}</h1>
<p>${escapeHtml(invitation.email)} is invited as ${escapeHtml(invitation.role)}.${invitation.hasPassword ? ' Sign in with your password to accept.' : ''}</p>${message ? `<p role="alert">${escapeHtml(message)}</p>` : ''}
<form method="post" action="${INVITATION_PATH}">
<input type="hidden" name="token" value="${escapeHtml(token)}">
<p><label for="password">${label}</label><br><input id="password" name="password" type="password" autocomplete="${autocomplete}" minlength="${invitation.hasPassword ? 1 : 10}" required></p>
<p><button type="submit">Join</button></p>
</form>`,
  );
}

const wantsJson = (ctx: Koa.Context) => ctx.is('application/json') === 'application/json';

export function consoleRoutes(deps: Deps): Router {
  const router = new Router();

  router.get('/login', async (ctx) => {
    const back = siteReturn(ctx.query);
    const token = consoleSession(ctx);
    const user = back.site && token ? await sessionUser(deps, token) : null;
    // Already signed in here: straight back to the private site with its token.
    if (user && back.site) return backToSite(ctx, deps, user.id, back);
    loginPage(ctx, 200, '', '', back, deps.config.siteHost);
  });

  router.post('/login', async (ctx) => {
    sameOrigin(ctx);
    const form = await readForm(ctx, deps);
    const json = wantsJson(ctx);
    let signedIn;
    try {
      signedIn = await signIn(deps, { email: form.email ?? '', password: form.password ?? '', address: ctx.ip });
    } catch (err) {
      if (err instanceof BerthError && err.code === 'too_many_attempts')
        ctx.set('Retry-After', String(err.details?.retryAfterSeconds));
      if (json || !(err instanceof BerthError)) throw err;
      return loginPage(ctx, err.status, err.message, form.email ?? '', siteReturn(form), deps.config.siteHost);
    }
    startSession(ctx, signedIn);
    const back = siteReturn(form);
    if (back.site) return backToSite(ctx, deps, signedIn.user.id, back);
    if (json) {
      ctx.body = { user: signedIn.user };
    } else {
      ctx.status = 303;
      ctx.redirect('/');
    }
  });

  router.get(SET_PASSWORD_PATH, async (ctx) => {
    const token = String(ctx.query.token ?? '');
    try {
      const { email } = await openSignInLink(deps, token);
      setPasswordPage(ctx, 200, token, email);
    } catch (err) {
      if (!(err instanceof BerthError)) throw err;
      unusableLink(ctx, err);
    }
  });

  router.post(SET_PASSWORD_PATH, async (ctx) => {
    sameOrigin(ctx);
    const form = await readForm(ctx, deps);
    const token = form.token ?? '';
    let email: string;
    try {
      ({ email } = await setPasswordWithLink(deps, token, form.password ?? ''));
    } catch (err) {
      if (!(err instanceof BerthError)) throw err;
      if (err.code === 'invalid_password') return setPasswordPage(ctx, err.status, token, '', err.message);
      return unusableLink(ctx, err);
    }
    startSession(ctx, await signIn(deps, { email, password: form.password ?? '', address: ctx.ip }));
    ctx.status = 303;
    ctx.redirect('/');
  });

  router.get(INVITATION_PATH, async (ctx) => {
    const token = String(ctx.query.token ?? '');
    try {
      invitationPage(ctx, 200, token, await openInvitation(deps, token));
    } catch (err) {
      if (!(err instanceof BerthError)) throw err;
      unusableLink(ctx, err);
    }
  });

  // A new user chooses a password; an existing one signs in with theirs. Either way they join, once.
  router.post(INVITATION_PATH, async (ctx) => {
    sameOrigin(ctx);
    const form = await readForm(ctx, deps);
    const token = form.token ?? '';
    const password = form.password ?? '';
    let invitation: OpenInvitation;
    try {
      invitation = await openInvitation(deps, token);
    } catch (err) {
      if (!(err instanceof BerthError)) throw err;
      return unusableLink(ctx, err);
    }
    try {
      if (invitation.hasPassword) {
        const signedIn = await signIn(deps, { email: invitation.email, password, address: ctx.ip });
        await acceptInvitation(deps, token);
        startSession(ctx, signedIn);
      } else {
        await acceptInvitation(deps, token, password);
        startSession(ctx, await signIn(deps, { email: invitation.email, password, address: ctx.ip }));
      }
    } catch (err) {
      if (!(err instanceof BerthError)) throw err;
      if (err.code === 'too_many_attempts') ctx.set('Retry-After', String(err.details?.retryAfterSeconds));
      if (err.code === 'invalid_invitation') return unusableLink(ctx, err);
      return invitationPage(ctx, err.status, token, invitation, err.message);
    }
    ctx.status = 303;
    ctx.redirect('/');
  });

  router.post('/logout', async (ctx) => {
    sameOrigin(ctx);
    const token = consoleSession(ctx);
    // Signing someone out is a change too: only the dashboard, which knows the token, may ask.
    if (
      token &&
      !safeEqual(ctx.get('X-CSRF-Token') || (await readForm(ctx, deps)).csrf || '', csrfToken(deps, token))
    ) {
      throw new BerthError('forbidden', 'sign out from the dashboard: the request lacks its X-CSRF-Token');
    }
    if (token) await signOut(deps, token);
    setConsoleSession(ctx, null);
    ctx.status = 303;
    ctx.redirect('/login');
  });

  router.get('/session', async (ctx) => {
    const token = consoleSession(ctx);
    const user = token ? await sessionUser(deps, token) : null;
    if (!user) throw new BerthError('unauthorized', 'not signed in: sign in at /login');
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { user, csrfToken: csrfToken(deps, token!) };
  });

  return router;
}
