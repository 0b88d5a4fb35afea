// Gives each request an id (echoed as Berth-Request-Id) and, when it ends, logs one line (method,
// path without the query string, status, duration, client address; never headers or bodies) and
// counts it in the metrics by route, a label of few values.
import crypto from 'node:crypto';
import type Koa from 'koa';
import type { Deps } from '../../services/deps.ts';

export interface RequestLine {
  reqId: string;
  kind: 'api' | 'site';
  /** The site's subdomain, for site requests. */
  host?: string | undefined;
  method: string;
  /** Without the query string, which may carry tokens. */
  path: string;
  status: number;
  /** The client's address (the proxy's report of it behind a trusted proxy). */
  ip: string;
}

/** The log line and metrics of a finished request (Koa's apps and the lean function path alike). */
export function finishRequest(deps: Pick<Deps, 'log' | 'metrics'>, line: RequestLine, route: string, started: bigint): void {
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  deps.log.info({ ...line, ms: Math.round(ms * 100) / 100 }, 'request');
  deps.metrics.request(line.kind, route, line.status, ms / 1000);
}

/** The route a request matched, as a metrics label: the router's pattern, never the path itself. */
function routeOf(ctx: Koa.Context, kind: 'api' | 'site'): string {
  if (kind === 'site') return ctx.path.startsWith('/_berth/') ? '/_berth' : 'web';
  const matched = (ctx as { _matchedRoute?: unknown })._matchedRoute;
  if (typeof matched === 'string') return matched;
  return ctx.path === '/mcp' ? '/mcp' : 'unmatched';
}

export function requestContext(deps: Pick<Deps, 'log' | 'metrics'>, kind: 'api' | 'site'): Koa.Middleware {
  return async (ctx, next) => {
    const started = process.hrtime.bigint();
    const requestId = crypto.randomUUID();
    ctx.state.requestId = requestId;
    ctx.set('Berth-Request-Id', requestId);
    try {
      await next();
    } finally {
      finishRequest(deps, { reqId: requestId, kind, host: kind === 'site' ? ctx.state.subdomain : undefined, method: ctx.method, path: ctx.path, status: ctx.status, ip: ctx.ip }, routeOf(ctx, kind), started);
    }
  };
}
