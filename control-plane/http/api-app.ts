// The control plane's Koa app: public service endpoints, MCP at /mcp, then the key-protected /v0 API.
import Koa from 'koa';
import Router from '@koa/router';
import { BerthError } from '../errors.ts';
import { openDownload } from '../services/exports.ts';
import { servesName } from '../domains/served-names.ts';
import { readiness } from '../readiness.ts';
import { safeEqual } from '../services/safe-equal.ts';
import { sendMetrics } from './metrics-endpoint.ts';
import type { Deps } from '../deps.ts';
import { mcpEndpoint } from './mcp-endpoint.ts';
import { cliLoginRoutes } from './cli-login.ts';
import { consoleRoutes } from './console.ts';
import { dashboardRoutes } from './dashboard.ts';
import { bearerToken, requireCredential } from './middleware/auth.ts';
import { errorEnvelope } from './middleware/errors.ts';
import { requestContext } from './middleware/request-context.ts';
import { applyProxySetting } from './proxy.ts';
import { buildOpenApi } from './openapi.ts';
import { mountRoutes } from './route.ts';
import { apiRoutes } from './routes/index.ts';

export function createApiApp(deps: Deps, version: string): Koa {
  const app = new Koa();
  app.silent = true;
  applyProxySetting(app, deps.config);

  const openapi = buildOpenApi(apiRoutes, version);
  const open = new Router();
  open.get('/', (ctx) => {
    ctx.body = { service: 'berth', version, api: '/v0', openapi: '/v0/openapi.json' };
  });
  // Liveness: the process answers. Readiness: it can do its work (metadata, blobs, Deno).
  open.get('/healthz', (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { ok: true };
  });
  open.get('/readyz', async (ctx) => {
    const state = await readiness(deps);
    ctx.set('Cache-Control', 'no-store');
    ctx.status = state.ready ? 200 : 503;
    ctx.body = state;
  });
  // Caddy's on_demand_tls `ask`: 200 for exactly the names this instance serves, else 404, before a
  // proxy in front orders a certificate. Public: it tells nobody more than a request to that name would.
  open.get('/_berth/tls/allowed', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const domain = typeof ctx.query.domain === 'string' ? ctx.query.domain : '';
    if (!domain || !(await servesName(deps, domain)))
      throw new BerthError('not_found', 'this instance serves no such name');
    ctx.body = { allowed: true };
  });
  open.get('/metrics', async (ctx) => {
    const token = deps.config.metricsToken;
    if (!token)
      throw new BerthError(
        'not_found',
        'metrics are not served here: set BERTH_METRICS_TOKEN, or BERTH_METRICS_ADDRESS for a listener of their own',
      );
    if (!safeEqual(bearerToken(ctx.get('Authorization')), token))
      throw new BerthError('unauthorized', 'metrics need "Authorization: Bearer <BERTH_METRICS_TOKEN>"');
    await sendMetrics(ctx, deps.metrics);
  });
  open.get('/v0/openapi.json', (ctx) => {
    ctx.body = openapi;
  });
  // Signed export links work without an API key: the signature is the credential.
  open.get('/v0/exports/:exportId/download', async (ctx) => {
    const { body, bytes } = await openDownload(
      deps,
      String(ctx.params.exportId),
      String(ctx.query.expires ?? ''),
      String(ctx.query.signature ?? ''),
    );
    ctx.body = body;
    ctx.set('Content-Type', 'application/sql; charset=utf-8');
    ctx.set('Content-Length', String(bytes));
    ctx.set('Content-Disposition', `attachment; filename="${ctx.params.exportId}.sql"`);
    ctx.set('Cache-Control', 'private, no-store');
  });

  const api = new Router();
  mountRoutes(api, apiRoutes, deps);

  app.use(requestContext(deps, 'api'));
  app.use(errorEnvelope(deps.log));
  app.use(dashboardRoutes(deps).routes());
  app.use(open.routes());
  app.use(consoleRoutes(deps).routes());
  app.use(cliLoginRoutes(deps).routes());
  app.use(mcpEndpoint(deps));
  app.use(requireCredential(deps));
  // Runs after the router and allowedMethods (405, OPTIONS) have had their say.
  app.use(async (ctx, next) => {
    await next();
    if (ctx.status === 404 && ctx.body == null) {
      throw new BerthError('not_found', 'no such API route; the API is described at /v0/openapi.json');
    }
  });
  app.use(api.routes());
  app.use(api.allowedMethods({ throw: true }));
  return app;
}
