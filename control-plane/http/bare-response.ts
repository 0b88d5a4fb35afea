// Answers written straight on Node's response by the lean site paths (site-files.ts and
// function-endpoint.ts), the same as the Koa apps write them: HTML pages, and the error envelope for
// any failure (middleware/errors.ts decides what a failure shows).
import type http from 'node:http';
import type { Deps } from '../services/deps.ts';
import { isClientAbort, toBerthError } from './middleware/errors.ts';

export function sendHtml(res: http.ServerResponse, status: number, html: string): void {
  res.writeHead(status, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store', 'Content-Length': Buffer.byteLength(html) });
  res.end(html);
}

/** The error envelope for `err`, or the connection's end when the answer has begun already. */
export function sendFailure(deps: Pick<Deps, 'log'>, res: http.ServerResponse, err: unknown, requestId: string): void {
  if (isClientAbort(err)) {
    deps.log.info({ reqId: requestId }, 'client closed the connection mid-request');
    res.statusCode = 499;
    res.destroy();
    return;
  }
  const { error, internal } = toBerthError(err);
  if (internal) deps.log.error({ reqId: requestId, err }, 'unhandled error');
  if (res.headersSent) {
    res.destroy();
    return;
  }
  for (const header of res.getHeaderNames()) if (header !== 'berth-request-id' && header !== 'connection') res.removeHeader(header);
  const body = JSON.stringify({ error: { code: error.code, message: error.message, ...(error.details ? { details: error.details } : {}) }, ...error.records });
  res.writeHead(error.status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}
