// API routes answered on Node's own request and response, outside the Koa stack: the database query
// endpoint, the API's hottest. server.ts hands a control-plane request here first; a request that
// names one of these routes exactly (its method, plain path segments) and presents an API key is
// answered here, anything else (a dashboard session, an encoded or trailing-slash path) by the Koa
// app's router, to the same route. Both authenticate with `credentialFor` and run the route through
// `answerOperation`, so the operation, its validation and its answer are one; this path keeps the
// Koa app's request id, log line, metrics label and error envelope.
import crypto from 'node:crypto';
import type http from 'node:http';
import type { Deps } from '../deps.ts';
import { sendFailure } from './bare-response.ts';
import { type CredentialSource, credentialFor, headerOf, presentedKey } from './middleware/auth.ts';
import { elapsedMs, finishRequest } from './middleware/request-context.ts';
import { clientAddress } from './proxy.ts';
import {
  type NextCommand,
  type OperationRoute,
  answerOperation,
  inputSource,
  isOperationRoute,
  nextCommands,
  pathParameters,
} from './route.ts';
import { apiRoutes } from './routes/index.ts';
import { urlPath } from './site-paths.ts';

/** The routes served here, by operationId. */
const LEAN_OPERATIONS = new Set(['queryDatabase']);

interface LeanRoute {
  route: OperationRoute;
  /** The route's path with each parameter one segment with nothing to decode, then the query string or the end. */
  pattern: RegExp;
  names: string[];
}

function leanRoute(route: OperationRoute): LeanRoute {
  // These routes read their input from a JSON body and make no links: the query and origin go unread.
  if (inputSource(route) !== 'body' || route.present)
    throw new Error(`${route.operationId} reads the query or makes links, which the lean API path does not`);
  const pattern = new RegExp(`^${route.path.replace(/:\w+/g, '([^/%?#]+)')}(?:\\?|$)`);
  return { route, pattern, names: pathParameters(route.path) };
}

const unread = (): never => {
  throw new Error('a lean API route reads neither the query nor the origin');
};

/** Answers the request and returns true when it is one of the lean routes', else returns false at once. */
export type LeanApiHandler = (req: http.IncomingMessage, res: http.ServerResponse) => boolean;

export function leanApiHandler(deps: Deps): LeanApiHandler {
  const render = nextCommands(apiRoutes);
  const routes = apiRoutes
    .filter(isOperationRoute)
    .flatMap((r) => (LEAN_OPERATIONS.has(r.operationId) ? [leanRoute(r)] : []));
  return (req, res) => {
    for (const lean of routes) {
      if (req.method !== lean.route.method) continue;
      const match = lean.pattern.exec(req.url ?? '');
      if (!match) continue;
      const header = headerOf(req);
      if (presentedKey(header) === undefined) return false;
      const params = Object.fromEntries(lean.names.map((name, i) => [name, match[i + 1]!]));
      void serve(deps, render, lean.route, params, { header, sessionCookie: () => undefined }, req, res);
      return true;
    }
    return false;
  };
}

async function serve(
  deps: Deps,
  render: NextCommand,
  route: OperationRoute,
  params: Record<string, string>,
  credentials: CredentialSource,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const started = process.hrtime.bigint();
  const requestId = crypto.randomUUID();
  const method = req.method ?? 'GET';
  // Koa's app authenticates before its router matches: a request refused there counts as unmatched.
  let matched = 'unmatched';
  try {
    const actor = await credentialFor(credentials, method, deps);
    matched = route.path;
    const answer = await answerOperation(route, deps, render, actor, { req, params, query: unread, origin: unread });
    // Koa's answer to a JSON body, header for header.
    const body = JSON.stringify(answer.body);
    res.writeHead(answer.status, {
      'Berth-Request-Id': requestId,
      ...answer.headers,
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': Buffer.byteLength(body),
    });
    res.end(body);
  } catch (err) {
    sendFailure(deps, res, err, requestId);
  }
  const line = {
    reqId: requestId,
    kind: 'api' as const,
    method,
    path: urlPath(req.url),
    status: res.statusCode,
    ip: clientAddress(req, deps.config.trustProxy),
    ms: elapsedMs(started),
  };
  finishRequest(deps, line, matched);
}
