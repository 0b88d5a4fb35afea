// What the browser sessions of the control plane and of PRIVATE sites share: their cookie's flags, and
// where a sign-in may send the browser afterwards.

/** The control plane's session cookie. */
export const CONSOLE_COOKIE = 'berth_console';

/** A site's session cookie: a member reading a PRIVATE site or a preview, on that host only. */
export const SESSION_COOKIE = '_berth_session';

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
