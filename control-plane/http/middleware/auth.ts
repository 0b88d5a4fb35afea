// API key authentication for /v0. The key's permission is checked against the HTTP method before any
// route runs, so a READ key can never start a write.
import type Koa from 'koa';
import { BerthError } from '../../errors.ts';
import type { Actor, Deps } from '../../services/deps.ts';
import { authenticate } from '../../services/keys.ts';

const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

function presentedKey(ctx: Koa.Context): string | undefined {
  const authorization = ctx.get('Authorization');
  if (authorization) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    return match ? match[1] : '';
  }
  return ctx.get('X-API-Key').trim() || undefined;
}

/** The actor behind the request's API key; 401 when there is none or it is unknown or revoked. */
export async function authenticateRequest(ctx: Koa.Context, deps: Deps): Promise<Actor> {
  const key = presentedKey(ctx);
  if (key === undefined) {
    throw new BerthError('unauthorized', 'an API key is required: send "Authorization: Bearer <key>" or "X-API-Key: <key>"');
  }
  const actor = key ? await authenticate(deps, key) : null;
  if (!actor) throw new BerthError('unauthorized', 'the API key is invalid or revoked');
  return actor;
}

export function requireApiKey(deps: Deps): Koa.Middleware {
  return async (ctx, next) => {
    const actor = await authenticateRequest(ctx, deps);
    if (actor.permission === 'READ' && !READ_METHODS.has(ctx.method)) {
      throw new BerthError('forbidden', 'this API key is read-only; a WRITE key is required for this request');
    }
    ctx.state.actor = actor;
    await next();
  };
}
