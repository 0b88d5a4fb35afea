// ANY /api/<name> on a site: hands the request to the function's worker (on a preview host, the
// preview's function, to members only unless the preview is PUBLIC: deployments/previews.ts) and streams
// its answer back. The platform's session cookie never reaches a function, and a function cannot set
// or clear any of Berth's cookies.
import type http from 'node:http';
import { pipeline } from 'node:stream';
import { BerthError, isErrorCode } from '../errors.ts';
import type { Deps } from '../deps.ts';
import { resolveEndpoint } from '../services/functions.ts';
import { resolveSite } from '../services/hosting.ts';
import { prepareBranch, previewEndpoint, resolvePreview } from '../deployments/previews.ts';
import { type SiteRequestHandler, leanSiteHandler, sendHtml } from './bare-response.ts';
import { mayRead } from './member-gate.ts';
import { noSitePage } from './pages.ts';
import { requestHost, requestProtocol } from './proxy.ts';
import { readBody } from './read-body.ts';
import { SESSION_COOKIE, setsBerthCookie } from './session-cookies.ts';
import { PoolFullError } from '../../runtime-host/pool.ts';
import { WorkerError } from '../../runtime-host/worker.ts';

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'content-length',
]);
const NULL_BODY_STATUSES = new Set([101, 204, 205, 304]);

/** The request's headers as pairs, minus hop-by-hop headers and the session cookie. */
export function functionRequestHeaders(rawHeaders: string[]): Array<[string, string]> {
  const headers: Array<[string, string]> = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    let value = rawHeaders[i + 1]!;
    if (HOP_BY_HOP.has(name)) continue;
    if (name === 'cookie') {
      value = value
        .split(';')
        .map((part) => part.trim())
        .filter((part) => part !== '' && part.split('=')[0]!.trim() !== SESSION_COOKIE)
        .join('; ');
      if (value === '') continue;
    }
    headers.push([name, value]);
  }
  return headers;
}

function toHttpError(err: unknown, deps: Deps, requestId: string): BerthError {
  if (err instanceof PoolFullError)
    return new BerthError('runtime_busy', 'all function workers are busy; try again shortly');
  if (err instanceof WorkerError) {
    switch (err.reason) {
      case 'handler': {
        const failure = err.failure;
        // An uncaught error with a code of Berth's own (e.g. from ctx.llm) answers as that error does.
        if (failure?.code && isErrorCode(failure.code)) return new BerthError(failure.code, failure.message);
        return new BerthError('function_error', 'the function threw an uncaught error; its logs have the details');
      }
      case 'timeout':
        return new BerthError('function_timeout', 'the function did not answer within its time limit');
      case 'memory':
        return new BerthError('function_memory_exceeded', 'the function exceeded its memory limit and was stopped');
      case 'protocol':
        return new BerthError(
          'function_protocol_error',
          'the function’s worker broke the runtime protocol and was stopped',
        );
      default:
        return new BerthError('function_crashed', 'the function’s worker stopped before answering');
    }
  }
  deps.log.error({ err, reqId: requestId }, 'function worker failed to start');
  return new BerthError('function_start_failed', 'the function could not be started');
}

/**
 * `/api/<name>` and anything below `/api/` of a site, straight on Node's request and response: the
 * hottest path of the platform skips the Koa stack but keeps its rules (request id, one log line, the
 * error envelope, the site's 404 page) through the same helpers.
 */
export const functionHandler = (deps: Deps): SiteRequestHandler =>
  leanSiteHandler(deps, 'api', (req, res, subdomain, segments, requestId, preview) =>
    serveFunction(deps, req, res, subdomain, segments, requestId, preview),
  );

/** Answers a request with the site's function `segments` name (["api", name]): its own path, or a rule's rewrite (site-files.ts). */
export async function serveFunction(
  deps: Deps,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  subdomain: string,
  segments: string[],
  requestId: string,
  label: string | undefined,
): Promise<void> {
  const site = await resolveSite(deps, subdomain);
  if (site?.status !== 'ACTIVE') return sendHtml(res, 404, noSitePage, requestId);
  const preview = label === undefined ? null : await resolvePreview(deps, site, label);
  if (label !== undefined) {
    // A preview's functions answer members only, unless its deployment's preview is PUBLIC (then they
    // are anonymous, as the live site's are); to anyone else a label that shows nothing looks the same.
    if (!preview?.public && !(await mayRead(deps, req, res, site, requestId))) return;
    if (!preview) return sendHtml(res, 404, noSitePage, requestId);
  }
  if (segments.length !== 2 || segments[1] === '')
    throw new BerthError('function_not_found', 'functions are served at /api/<name>');
  const name = segments[1]!;
  const version = preview ? await previewEndpoint(deps, preview, name) : await resolveEndpoint(deps, site.id, name);
  if (!version) throw new BerthError('function_not_found', `no function named "${name}" is deployed on this site`);
  if (preview) await prepareBranch(deps, preview);
  const limit = deps.config.maxFunctionBodyBytes;
  const body = await readBody(
    { req },
    limit,
    () => new BerthError('payload_too_large', `function request bodies may be at most ${limit} bytes`),
  );
  const method = req.method ?? 'GET';

  // A client that hangs up cancels the call; the worker is told, and the function's request aborts.
  let cancel: (() => void) | undefined;
  let gone = false;
  res.once('close', () => {
    if (res.writableFinished) return;
    gone = true;
    cancel?.();
  });
  let response;
  const invoked = performance.now();
  const counted = label === undefined;
  try {
    response = await deps.runtime.invoke(
      version,
      {
        method,
        url: requestUrl(req, deps.config.trustProxy),
        headers: functionRequestHeaders(req.rawHeaders),
        body,
        requestId,
      },
      (cancelCall) => {
        if (gone) cancelCall();
        else cancel = cancelCall;
      },
    );
  } catch (err) {
    // A call refused for want of a worker slot never reached the function.
    if (counted && !(err instanceof PoolFullError))
      deps.analytics.functionCall(site.id, performance.now() - invoked, true);
    throw toHttpError(err, deps, requestId);
  }
  if (counted) deps.analytics.functionCall(site.id, performance.now() - invoked, false);

  // The head is written whole, Berth's request id first; the function may not set Berth's cookies.
  const head: string[] = ['Berth-Request-Id', requestId];
  for (const [header, value] of response.headers) {
    if (HOP_BY_HOP.has(header) || (header === 'set-cookie' && setsBerthCookie(value))) continue;
    // On a preview host the server's X-Robots-Tag stands: a function does not make a preview indexable.
    if (header === 'x-robots-tag' && res.hasHeader(header)) continue;
    head.push(header, value);
  }
  const bodiless = NULL_BODY_STATUSES.has(response.status) || method === 'HEAD';
  if (!bodiless && Buffer.isBuffer(response.body)) head.push('Content-Length', String(response.body.length));
  try {
    res.writeHead(response.status, head);
  } catch (err) {
    // A header Node refuses to send (e.g. a control character in its value) fails the call as a whole.
    if (!Buffer.isBuffer(response.body)) response.body.destroy();
    throw err;
  }
  if (bodiless) {
    if (!Buffer.isBuffer(response.body)) response.body.resume();
    res.end();
    return;
  }
  if (Buffer.isBuffer(response.body)) {
    res.end(response.body);
    return;
  }
  pipeline(response.body, res, () => {});
}

/** The URL the function sees: the site's own scheme and host, as the browser asked for it. */
function requestUrl(req: http.IncomingMessage, trustProxy: boolean): string {
  return `${requestProtocol(req, trustProxy)}://${requestHost(req, trustProxy)}${req.url ?? '/'}`;
}
