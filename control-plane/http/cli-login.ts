// What the CLI's `berth login` and `berth logout` speak before they hold a key: start a login request,
// poll it until a signed-in user approves it in the dashboard, and revoke the key it got. Approval is
// an operation of the catalogue (POST /v0/cli-logins/:code/approve), made with a session.
import Router from '@koa/router';
import type Koa from 'koa';
import { BerthError } from '../errors.ts';
import { pollCliLogin, startCliLogin } from '../services/cli-logins.ts';
import type { Deps } from '../deps.ts';
import { revokeKey } from '../services/keys.ts';
import { readJsonBody } from './json-body.ts';
import { authenticateRequest } from './middleware/auth.ts';
import { publicOrigin } from './proxy.ts';

async function jsonObject(ctx: Koa.Context, deps: Deps): Promise<Record<string, unknown>> {
  const body = await readJsonBody(ctx, deps.config.maxJsonBytes);
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new BerthError('invalid_request', 'body: the JSON body must be an object');
  return body as Record<string, unknown>;
}

export function cliLoginRoutes(deps: Deps): Router {
  const router = new Router({ prefix: '/cli-login' });

  router.post('/', async (ctx) => {
    const body = await jsonObject(ctx, deps);
    let started;
    try {
      started = await startCliLogin(deps, { machine: body.machine, address: ctx.ip });
    } catch (err) {
      if (err instanceof BerthError && err.code === 'too_many_attempts')
        ctx.set('Retry-After', String(err.details?.retryAfterSeconds));
      throw err;
    }
    const { login, pollToken } = started;
    ctx.status = 201;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { login, pollToken, approveUrl: `${publicOrigin(ctx, deps.config)}/#/cli-login/${login.code}` };
  });

  router.post('/poll', async (ctx) => {
    const body = await jsonObject(ctx, deps);
    const result = await pollCliLogin(deps, body.pollToken);
    ctx.status = result.status === 'PENDING' ? 202 : 200;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = result;
  });

  // `berth logout`: a key may always revoke itself, whatever its permission.
  router.post('/revoke', async (ctx) => {
    const actor = await authenticateRequest(ctx, deps);
    if (actor.via === 'session')
      throw new BerthError('invalid_request', 'send the key to revoke as "Authorization: Bearer <key>"');
    await revokeKey(deps, actor.id);
    ctx.body = { revoked: true, keyId: actor.id };
  });

  return router;
}
