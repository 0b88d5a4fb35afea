// Gives each request an id (echoed as Berth-Request-Id) and, when it ends, logs one line (method,
// path without the query string, status, duration, client address; never headers or bodies) and
// counts it in the metrics by route, a label of few values.
import crypto from 'node:crypto';
import type Koa from 'koa';
import { type RequestLine, logRequest } from '../../log.ts';
import type { Deps } from '../../deps.ts';
import { countSiteRequest, sentBefore } from '../site-traffic.ts';

/** How long since `started` (process.hrtime.bigint()), in milliseconds rounded to two places. */
export const elapsedMs = (started: bigint): number => Math.round(Number(process.hrtime.bigint() - started) / 1e4) / 100;

/** The log line and metrics of a finished request (Koa's apps and the lean site paths alike). */
export function finishRequest(deps: Pick<Deps, 'log' | 'metrics'>, line: RequestLine, route: string): void {
  logRequest(deps.log, line);
  deps.metrics.request(line.kind, route, line.status, line.ms / 1000);
}

/** The route a request matched, as a metrics label: the router's pattern, never the path itself. */
function routeOf(ctx: Koa.Context, kind: 'api' | 'site'): string {
  if (kind === 'site') return ctx.path.startsWith('/_berth/') ? '/_berth' : 'web';
  const matched = (ctx as { _matchedRoute?: unknown })._matchedRoute;
  if (typeof matched === 'string') return matched;
  return ctx.path === '/mcp' ? '/mcp' : 'unmatched';
}

export function requestContext(deps: Deps, kind: 'api' | 'site'): Koa.Middleware {
  return async (ctx, next) => {
    const started = process.hrtime.bigint();
    const sent = sentBefore(ctx.req);
    const requestId = crypto.randomUUID();
    ctx.state.requestId = requestId;
    ctx.set('Berth-Request-Id', requestId);
    try {
      await next();
    } finally {
      const line = {
        reqId: requestId,
        kind,
        host: kind === 'site' ? ctx.state.subdomain : undefined,
        method: ctx.method,
        path: ctx.path,
        status: ctx.status,
        ip: ctx.ip,
        ms: elapsedMs(started),
      };
      finishRequest(deps, line, routeOf(ctx, kind));
      const { subdomain, preview } = ctx.state as { subdomain?: string | null; preview?: string };
      if (kind === 'site' && subdomain && preview === undefined)
        countSiteRequest(deps, ctx.req, ctx.res, subdomain, line.path, line.ms, sent);
    }
  };
}
