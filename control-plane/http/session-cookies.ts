// What the browser sessions of the control plane and of PRIVATE sites share: their cookies' names and
// flags, which Set-Cookie a function may not send, and where a sign-in may send the browser afterwards.
import type Koa from 'koa';

/** A site's session cookie: a member reading a PRIVATE site or a preview, on that host only. */
export const SESSION_COOKIE = '_berth_session';

/**
 * The control plane's session cookie. Browsers keep a `__Host-` cookie only when it is Secure, has
 * Path=/ and no Domain, and was set by the host itself: no page or function of a site under the site
 * host can plant one on the control plane's host (a planted session is a login CSRF).
 */
export const CONSOLE_COOKIE = '__Host-berth_console';

/**
 * The control plane's cookie where browsers keep no Secure cookie: plain http to a name that is not
 * loopback. Berth goes on working there under this name, without the prefix's protection (docs/deploy.md).
 */
export const PLAIN_HTTP_CONSOLE_COOKIE = 'berth_console';

const BERTH_COOKIES = new Set(
  [SESSION_COOKIE, CONSOLE_COOKIE, PLAIN_HTTP_CONSOLE_COOKIE].map((name) => name.toLowerCase()),
);

/**
 * Whether a Set-Cookie header would set or clear one of Berth's cookies, whatever its attributes and
 * the case of its name; a nameless cookie too, since browsers send it as its bare value
 * (`=berth_console=x` arrives as `berth_console=x`).
 */
export function setsBerthCookie(setCookie: string): boolean {
  const pair = setCookie.split(';', 1)[0]!;
  const at = pair.indexOf('=');
  const name = at === -1 ? '' : pair.slice(0, at).trim();
  return name === '' || BERTH_COOKIES.has(name.toLowerCase());
}

/** Names browsers treat as a secure context over plain http, where they keep Secure cookies. */
const isLoopback = (hostname: string): boolean =>
  hostname === 'localhost' ||
  hostname.endsWith('.localhost') ||
  /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname) ||
  hostname === '[::1]' ||
  hostname === '::1';

/** The control plane's cookie for this request: `__Host-` over https and on loopback, else the plain-http name. */
function consoleCookie(ctx: Koa.Context): { name: string; secure: boolean } {
  const secure = ctx.protocol === 'https' || isLoopback(ctx.hostname);
  return { name: secure ? CONSOLE_COOKIE : PLAIN_HTTP_CONSOLE_COOKIE, secure };
}

/** The control-plane session token the request carries, read under this request's name only. */
export const consoleSession = (ctx: Koa.Context): string | undefined => ctx.cookies.get(consoleCookie(ctx).name);

/** Sets (or, with null, clears) the control plane's session cookie. */
export function setConsoleSession(ctx: Koa.Context, token: string | null, maxAge?: number): void {
  const { name, secure } = consoleCookie(ctx);
  // Over plain http to loopback the cookies module refuses a Secure cookie unless told the browser keeps it.
  if (secure) ctx.cookies.secure = true;
  ctx.cookies.set(name, token, { ...sessionCookie(ctx.protocol, maxAge), secure });
}

/** HttpOnly, SameSite=Lax and, over https, Secure; a cookie of the host that sets it (no Domain). */
export const sessionCookie = (protocol: string, maxAge?: number) => ({
  httpOnly: true,
  sameSite: 'lax' as const,
  secure: protocol === 'https',
  path: '/',
  ...(maxAge !== undefined ? { maxAge } : {}),
});

/** A path of the same site, never another origin (`//host`, `/\host`, `https:`, control characters). */
export function sitePath(next: unknown): string {
  return typeof next === 'string' && /^\/(?![/\\])[^\u0000-\u001f\\]*$/.test(next) ? next : '/';
}
