// The lean site paths (site-files.ts and function-endpoint.ts) on Node's own request and response,
// with what the Koa apps' middleware gives every request: an id, the error envelope for any failure
// (middleware/errors.ts decides what a failure shows), one log line with its metrics; and HTML pages.
import crypto from 'node:crypto';
import type http from 'node:http';
import type { Deps } from '../deps.ts';
import { logFailure } from '../failures.ts';
import { isClientAbort, toBerthError } from './middleware/errors.ts';
import { elapsedMs, finishRequest } from './middleware/request-context.ts';
import { clientAddress } from './proxy.ts';
import { urlPath } from './site-paths.ts';
import { countSiteRequest, sentBefore } from './site-traffic.ts';

export type SiteRequestHandler = (
  req: http.IncomingMessage,
  res: http.ServerResponse,
  subdomain: string,
  segments: string[],
  /** The preview host's label (deployments/previews.ts), when the request came to one. */
  preview?: string,
) => void;

/**
 * Answers a request of a lean site path. It sends Berth-Request-Id with every answer it writes (these
 * paths write their heads whole, which Node does fastest when no header was set before), and returns
 * a promise only when the answer waits on something: a cached file answers within the call.
 */
export type LeanServe = (
  req: http.IncomingMessage,
  res: http.ServerResponse,
  subdomain: string,
  segments: string[],
  requestId: string,
  preview: string | undefined,
) => Promise<void> | void;

/** A lean site path that answers with `serve`, counted in the metrics under `route`. */
export function leanSiteHandler(deps: Deps, route: string, serve: LeanServe): SiteRequestHandler {
  return (req, res, subdomain, segments, preview) => {
    const started = process.hrtime.bigint();
    const sent = sentBefore(req);
    const requestId = crypto.randomUUID();
    let answering: Promise<void> | void;
    try {
      answering = serve(req, res, subdomain, segments, requestId, preview);
    } catch (err) {
      answering = Promise.reject(err);
    }
    const over = () => finish(deps, route, req, res, subdomain, preview, requestId, started, sent);
    if (answering === undefined) return over();
    answering.then(over, (err: unknown) => {
      sendFailure(deps, res, err, requestId);
      over();
    });
  };
}

function finish(
  deps: Deps,
  route: string,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  subdomain: string,
  preview: string | undefined,
  requestId: string,
  started: bigint,
  sent: number,
): void {
  const line = {
    reqId: requestId,
    kind: 'site' as const,
    host: preview === undefined ? subdomain : `${preview}--${subdomain}`,
    method: req.method ?? 'GET',
    path: urlPath(req.url),
    status: res.statusCode,
    ip: clientAddress(req, deps.config.trustProxy),
    ms: elapsedMs(started),
  };
  finishRequest(deps, line, route);
  if (preview === undefined) countSiteRequest(deps, req, res, subdomain, line.path, line.ms, sent);
}

export function sendHtml(res: http.ServerResponse, status: number, html: string, requestId: string): void {
  res.writeHead(status, {
    'Berth-Request-Id': requestId,
    'Content-Type': 'text/html; charset=utf-8',
    'Cache-Control': 'no-store',
    'Content-Length': Buffer.byteLength(html),
  });
  res.end(html);
}

const SERVER_HEADERS = new Set(['connection', 'x-robots-tag', 'strict-transport-security', 'allow']);

/** The error envelope for `err`, or the connection's end when the answer has begun already. */
export function sendFailure(deps: Pick<Deps, 'log'>, res: http.ServerResponse, err: unknown, requestId: string): void {
  if (isClientAbort(err)) {
    deps.log.info({ reqId: requestId }, 'client closed the connection mid-request');
    res.statusCode = 499;
    res.destroy();
    return;
  }
  const { error, internal } = toBerthError(err);
  logFailure(deps.log, { reqId: requestId }, err, error, internal);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  // What the server set for the whole answer before the handler ran stays: Connection, a preview's
  // X-Robots-Tag, Strict-Transport-Security over HTTPS; and the Allow of a method_not_allowed.
  for (const header of res.getHeaderNames()) if (!SERVER_HEADERS.has(header)) res.removeHeader(header);
  const body = JSON.stringify({
    error: { code: error.code, message: error.message, ...(error.details ? { details: error.details } : {}) },
    ...error.records,
  });
  res.writeHead(error.status, {
    'Berth-Request-Id': requestId,
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(body);
}
