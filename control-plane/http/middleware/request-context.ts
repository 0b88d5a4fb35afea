// Gives each request an id (echoed as Berth-Request-Id) and logs one line when it ends:
// method, path without the query string, status and duration. Headers and bodies are never logged.
import crypto from 'node:crypto';
import type Koa from 'koa';
import type { Logger } from '../../log.ts';

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

/** The one log line of a finished request (Koa's apps and the lean function path alike). */
export function logRequest(log: Logger, line: RequestLine, started: bigint): void {
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  log.info({ ...line, ms: Math.round(ms * 100) / 100 }, 'request');
}

export function requestContext(log: Logger, kind: 'api' | 'site'): Koa.Middleware {
  return async (ctx, next) => {
    const started = process.hrtime.bigint();
    const requestId = crypto.randomUUID();
    ctx.state.requestId = requestId;
    ctx.set('Berth-Request-Id', requestId);
    try {
      await next();
    } finally {
      logRequest(log, { reqId: requestId, kind, host: kind === 'site' ? ctx.state.subdomain : undefined, method: ctx.method, path: ctx.path, status: ctx.status, ip: ctx.ip }, started);
    }
  };
}
