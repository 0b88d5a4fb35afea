// Who is asking, for /v0 and /mcp: an API key (Authorization: Bearer, or X-API-Key), or else a
// signed-in user's dashboard session (the control plane's session cookie). A session request names its account
// in Berth-Account (needed when the user has several) and carries the session's anti-forgery token in
// X-CSRF-Token, which a page of another site cannot read and so cannot send. A READ key's permission
// is checked against the HTTP method before any route runs, so it can never start a write. The Koa
// app and the lean API path (lean-api.ts) both ask through `credentialFor`.
import type http from 'node:http';
import type Koa from 'koa';
import { BerthError } from '../../errors.ts';
import type { Actor, Deps } from '../../deps.ts';
import { authenticate } from '../../services/keys.ts';
import { safeEqual } from '../../services/safe-equal.ts';
import { csrfToken, sessionUser } from '../../services/sessions.ts';
import { digestToken } from '../../services/tokens.ts';
import { consoleSession } from '../session-cookies.ts';

const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The token of an `Authorization: Bearer <token>` header; '' for any other Authorization value. */
export const bearerToken = (authorization: string): string => /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1] ?? '';

/** What authentication reads of a request: its headers, and the dashboard's session cookie. */
export interface CredentialSource {
  /** A header's value, '' when it was not sent. */
  header(name: string): string;
  sessionCookie(): string | undefined;
}

const koaSource = (ctx: Koa.Context): CredentialSource => ({
  header: (name) => ctx.get(name),
  sessionCookie: () => consoleSession(ctx),
});

/** The headers of Node's own request, as Koa's `ctx.get` reads them. */
export const headerOf =
  (req: http.IncomingMessage) =>
  (name: string): string => {
    const value = req.headers[name.toLowerCase()];
    return typeof value === 'string' ? value : '';
  };

/** The key a request presents, '' for an Authorization header that is not a bearer token; undefined for none. */
export function presentedKey(header: (name: string) => string): string | undefined {
  const authorization = header('Authorization');
  if (authorization) return bearerToken(authorization);
  return header('X-API-Key').trim() || undefined;
}

/**
 * The signed-in user acting in one of their accounts. Every request made with the cookie needs the
 * token, reads included: a reveal of a secret writes the access log, and a link from another site
 * must not be able to make it.
 */
async function sessionActor(source: CredentialSource, deps: Deps, token: string): Promise<Actor> {
  const user = await sessionUser(deps, token);
  if (!user) throw new BerthError('unauthorized', 'the session has ended; sign in again at /login');
  if (!safeEqual(source.header('X-CSRF-Token'), csrfToken(deps, token))) {
    throw new BerthError('forbidden', 'a request made with a session must carry its X-CSRF-Token (from GET /session)');
  }
  const chosen = source.header('Berth-Account').trim();
  const membership = chosen
    ? user.memberships.find((m) => m.accountId === chosen)
    : user.memberships.length === 1
      ? user.memberships[0]
      : undefined;
  if (!membership) {
    if (chosen) throw new BerthError('forbidden', 'you are not a member of that account');
    if (user.memberships.length === 0) throw new BerthError('forbidden', 'you are not a member of any account');
    throw new BerthError(
      'invalid_request',
      'you are a member of several accounts: name one in the Berth-Account header',
    );
  }
  return {
    via: 'session',
    accountId: membership.accountId,
    permission: 'WRITE',
    id: `user:${user.id}`,
    user: { id: user.id, email: user.email, role: membership.role, sessionHash: digestToken(token) },
  };
}

/** The actor behind the request's API key or session; 401 when there is none or it has ended. */
export const authenticateRequest = (ctx: Koa.Context, deps: Deps): Promise<Actor> =>
  authenticateSource(koaSource(ctx), deps);

async function authenticateSource(source: CredentialSource, deps: Deps): Promise<Actor> {
  const key = presentedKey(source.header);
  if (key === undefined) {
    const session = source.sessionCookie();
    if (session) return sessionActor(source, deps, session);
    throw new BerthError(
      'unauthorized',
      'an API key is required: send "Authorization: Bearer <key>" or "X-API-Key: <key>"',
    );
  }
  const actor = key ? await authenticate(deps, key) : null;
  if (!actor) throw new BerthError('unauthorized', 'the API key is invalid or revoked');
  return actor;
}

/** The actor of an API request made with `method`: a READ credential may only read (403 otherwise). */
export async function credentialFor(source: CredentialSource, method: string, deps: Deps): Promise<Actor> {
  const actor = await authenticateSource(source, deps);
  if (actor.permission === 'READ' && !READ_METHODS.has(method)) {
    throw new BerthError('forbidden', 'this API key is read-only; a WRITE key is required for this request');
  }
  return actor;
}

export function requireCredential(deps: Deps): Koa.Middleware {
  return async (ctx, next) => {
    ctx.state.actor = await credentialFor(koaSource(ctx), ctx.method, deps);
    await next();
  };
}
