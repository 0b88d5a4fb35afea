// GET and HEAD of a site's web files, straight on Node's request and response: the private-site gate,
// the site's routing rules (web/_redirects and web/_headers, compiled once for their contents:
// routing/), /web files by path with conditional and range requests, directories with their index.html
// and clean URLs with their .html page, and the site's own 404.html; on a preview host, the preview's
// files and rules (deployments/previews.ts), to members only unless its deployment's preview is PUBLIC.
// The hottest path of hosting skips the Koa stack but keeps its rules (request id, one log line, the
// error envelope) through the same helpers. A public site's file whose lookups, bytes and rules are
// cached is answered without waiting on anything: one head written whole, one write.
import type http from 'node:http';
import { pipeline } from 'node:stream';
import fresh from 'fresh';
import rangeParser from 'range-parser';
import { BerthError } from '../errors.ts';
import type { Deps } from '../deps.ts';
import { previewFile, resolvePreview } from '../deployments/previews.ts';
import { compileRoutes, compiledRoutes } from '../routing/compiled-routes.ts';
import type { RouteAnswer, RouteTable } from '../routing/route-table.ts';
import { HEADERS_FILE, REDIRECTS_FILE, isRulesFile } from '../routing/rules-files.ts';
import type { CachedSite, CachedWebFile } from '../services/hosting-cache.ts';
import {
  cachedBody,
  cachedSite,
  cachedWebFile,
  rangeBody,
  resolveSite,
  resolveWebFile,
  smallBody,
  streamBody,
} from '../services/hosting.ts';
import { type SiteRequestHandler, leanSiteHandler, sendHtml } from './bare-response.ts';
import { serveFunction } from './function-endpoint.ts';
import { mayRead } from './member-gate.ts';
import { noSitePage, notFoundPage } from './pages.ts';
import { urlPath, webSegments } from './site-paths.ts';

export const siteFilesHandler = (deps: Deps): SiteRequestHandler =>
  leanSiteHandler(deps, 'web', (req, res, subdomain, segments, requestId, preview) =>
    preview === undefined
      ? serve(deps, req, res, subdomain, segments, requestId)
      : servePreview(deps, req, res, subdomain, preview, segments, requestId),
  );

/** What a path holds: a full bucket path (e.g. "web/index.html") to the file served there, or null. */
type FileLookup = (path: string) => Promise<CachedWebFile | null>;

/** Answers a request with the function `name` of the site (or of its preview): a rewrite's target. */
type FunctionAnswer = (name: string) => Promise<void>;

/** Headers of the site's own rules (web/_headers) for an answer: none for most. */
type RuleHeaders = ReadonlyArray<readonly [string, string]>;
const NO_HEADERS: RuleHeaders = [];

/**
 * A preview host: the preview's files, to members only unless its deployment's preview is PUBLIC (then
 * behind the site's own gate, as live). To anyone else a label that shows nothing looks like one that
 * is not theirs to see.
 */
async function servePreview(
  deps: Deps,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  subdomain: string,
  label: string,
  segments: string[],
  requestId: string,
): Promise<void> {
  const site = await resolveSite(deps, subdomain);
  if (site?.status !== 'ACTIVE') return sendHtml(res, 404, noSitePage, requestId);
  const preview = await resolvePreview(deps, site, label);
  const open = preview?.public && site.access === 'PUBLIC';
  if (!open && !(await mayRead(deps, req, res, site, requestId))) return;
  if (!preview) return sendHtml(res, 404, noSitePage, requestId);
  await serveWeb(
    deps,
    req,
    res,
    segments,
    requestId,
    (path) => previewFile(deps, preview, path),
    (name) => serveFunction(deps, req, res, subdomain, ['api', name], requestId, label),
  );
}

function serve(
  deps: Deps,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  subdomain: string,
  segments: string[],
  requestId: string,
): Promise<void> | void {
  const site = cachedSite(deps, subdomain);
  if (site === undefined)
    return resolveSite(deps, subdomain).then((found) =>
      serveSite(deps, req, res, subdomain, found, segments, requestId),
    );
  return serveSite(deps, req, res, subdomain, site, segments, requestId);
}

function serveSite(
  deps: Deps,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  subdomain: string,
  site: CachedSite | null,
  segments: string[],
  requestId: string,
): Promise<void> | void {
  if (site?.status !== 'ACTIVE') return sendHtml(res, 404, noSitePage, requestId);
  const functions: FunctionAnswer = (name) =>
    serveFunction(deps, req, res, subdomain, ['api', name], requestId, undefined);
  if (site.access === 'PRIVATE') return servePrivate(deps, req, res, site, segments, requestId, functions);
  // The common case first: the file named, its lookup, its bytes and the site's rules cached, and no
  // rule forced over the file.
  if (segments.at(-1) !== '' && reads(req)) {
    const path = `web/${segments.join('/')}`;
    const file = !isRulesFile(path) && cachedWebFile(deps, site.bucketId, path);
    if (file) {
      const body = cachedBody(deps, file);
      const routes = body && cachedRoutes(deps, site);
      if (body && routes !== undefined && !forcedFor(routes, segments))
        return sendFile(deps, req, res, file, requestId, routes?.headersFor(segments) ?? NO_HEADERS, body);
    }
  }
  return serveWeb(deps, req, res, segments, requestId, live(deps, site), functions);
}

/** The live site's route table when its rules files' lookups and their table are cached (null: no rules). */
function cachedRoutes(deps: Deps, site: CachedSite): RouteTable | null | undefined {
  const redirects = cachedWebFile(deps, site.bucketId, REDIRECTS_FILE);
  const headers = cachedWebFile(deps, site.bucketId, HEADERS_FILE);
  if (redirects === undefined || headers === undefined) return undefined;
  return compiledRoutes(redirects, headers);
}

/** A forced rule matches the path: it answers whatever file there is. */
const forcedFor = (routes: RouteTable | null, segments: string[]): boolean =>
  routes?.redirectsFor(segments).some((rule) => routes.forced(rule)) ?? false;

async function servePrivate(
  deps: Deps,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  site: CachedSite,
  segments: string[],
  requestId: string,
  functions: FunctionAnswer,
): Promise<void> {
  if (await mayRead(deps, req, res, site, requestId))
    await serveWeb(deps, req, res, segments, requestId, live(deps, site), functions);
}

/** The site's current files. */
const live =
  (deps: Deps, site: CachedSite): FileLookup =>
  (path) =>
    resolveWebFile(deps, site, path);

/**
 * A path of the site: the site's rules first (web/_redirects, in order: a forced rule whatever the
 * path holds, another only where no file answers), then its file, a directory's index.html or a clean
 * URL's page, then its 404 page; the headers of web/_headers on every file answered.
 */
async function serveWeb(
  deps: Deps,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  segments: string[],
  requestId: string,
  lookup: FileLookup,
  functions: FunctionAnswer,
): Promise<void> {
  const routes = await compileRoutes(await lookup(REDIRECTS_FILE), await lookup(HEADERS_FILE), (sha256) =>
    deps.blobs.read(sha256),
  );
  const headers = routes?.headersFor(segments) ?? NO_HEADERS;
  const [path, query] = splitQuery(req.url ?? '/');
  let own: OwnAnswer | null | undefined;
  for (const rule of routes?.redirectsFor(segments) ?? []) {
    if (!routes!.forced(rule)) {
      own ??= await ownAnswer(lookup, segments, urlPath(path), query);
      if (own) continue;
    }
    return answerRule(deps, req, res, routes!.answer(rule, segments, query), requestId, lookup, headers, functions);
  }
  if (!reads(req)) return refuseMethod(res);
  own ??= await ownAnswer(lookup, segments, urlPath(path), query);
  if (own && 'file' in own) return sendFile(deps, req, res, own.file, requestId, headers);
  if (own) {
    res.writeHead(308, { 'Berth-Request-Id': requestId, Location: own.canonical, 'Content-Length': 0 });
    res.end();
    return;
  }
  await sendMissing(deps, req, res, lookup, requestId, headers);
}

/** What a path holds of the site's own: a file, or the one form of its URL to send the browser to. */
type OwnAnswer = { file: CachedWebFile } | { canonical: string };

/**
 * The file a path names: itself; for "/docs/" its index.html; for "/about" web/about.html where there is
 * no file "about". A page has one URL: "/docs" is sent to "/docs/" where web/docs/index.html answers
 * (so its relative links work), and "/about/" to "/about" where web/about.html does.
 */
async function ownAnswer(
  lookup: FileLookup,
  segments: string[],
  path: string,
  query: string,
): Promise<OwnAnswer | null> {
  const relative = segments.join('/');
  if (segments.at(-1) === '') {
    const index = await lookup(`web/${relative}index.html`);
    if (index) return { file: index };
    const bare = relative.slice(0, -1);
    if (bare && (await lookup(`web/${bare}.html`))) return { canonical: `${path.slice(0, -1)}${query}` };
    return null;
  }
  const exact = isRulesFile(`web/${relative}`) ? null : await lookup(`web/${relative}`);
  if (exact) return { file: exact };
  if (await lookup(`web/${relative}/index.html`)) return { canonical: `${path}/${query}` };
  const page = await lookup(`web/${relative}.html`);
  return page ? { file: page } : null;
}

/**
 * A rule's answer: a redirect; a rewrite (200) with the file or the function of the path it names, the
 * browser's URL unchanged; or a 404 or 410 with the page it names.
 */
async function answerRule(
  deps: Deps,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  answer: RouteAnswer,
  requestId: string,
  lookup: FileLookup,
  headers: RuleHeaders,
  functions: FunctionAnswer,
): Promise<void> {
  if (answer.status >= 300 && answer.status < 400) {
    res.writeHead(answer.status, { 'Berth-Request-Id': requestId, Location: answer.to, 'Content-Length': 0 });
    res.end();
    return;
  }
  let target: string[] | null;
  try {
    target = webSegments(answer.path);
  } catch {
    target = null;
  }
  if (target?.[0] === 'api' && target.length === 2 && target[1] !== '' && answer.status === 200)
    return functions(target[1]!);
  if (!reads(req)) return refuseMethod(res);
  const own = target && (await ownAnswer(lookup, target, answer.path, ''));
  // A rewrite answers with the page itself, never with a redirect to its canonical URL.
  const file =
    own && 'file' in own ? own.file : target && (await lookup(`web/${target.filter(Boolean).join('/')}/index.html`));
  if (!file) return sendMissing(deps, req, res, lookup, requestId, headers);
  if (answer.status === 200) return sendFile(deps, req, res, file, requestId, headers);
  return sendNotFound(deps, req, res, file, requestId, headers, answer.status);
}

/** The site's 404.html, or Berth's own page. */
async function sendMissing(
  deps: Deps,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  lookup: FileLookup,
  requestId: string,
  headers: RuleHeaders,
): Promise<void> {
  const custom404 = await lookup('web/404.html');
  if (custom404) return sendNotFound(deps, req, res, custom404, requestId, headers, 404);
  sendHtml(res, 404, notFoundPage, requestId);
}

/** Files answer GET and HEAD; the site's rules may send other methods on to a function, or elsewhere. */
const reads = (req: http.IncomingMessage): boolean => req.method === 'GET' || req.method === 'HEAD';

function refuseMethod(res: http.ServerResponse): never {
  res.setHeader('Allow', 'GET, HEAD');
  throw new BerthError('method_not_allowed', 'web files answer GET and HEAD only');
}

const splitQuery = (url: string): [string, string] => {
  const at = url.indexOf('?');
  return at === -1 ? [url, ''] : [url.slice(0, at), url.slice(at)];
};

/**
 * `head` with the site's rule headers in it, each in place of Berth's own of that name; what the server
 * set for the whole answer stands (a preview's X-Robots-Tag: a rule does not make a preview indexable).
 */
function withRuleHeaders(
  res: http.ServerResponse,
  head: http.OutgoingHttpHeaders,
  headers: RuleHeaders,
): http.OutgoingHttpHeaders {
  for (const [name, value] of headers) {
    const lower = name.toLowerCase();
    if (res.hasHeader(lower)) continue;
    for (const key of Object.keys(head)) if (key.toLowerCase() === lower) delete head[key];
    head[name] = value;
  }
  return head;
}

/** A page of the site answered with a status of its own (its 404.html, a rule's 404 or 410), never cached by browsers. */
async function sendNotFound(
  deps: Deps,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  file: CachedWebFile,
  requestId: string,
  headers: RuleHeaders,
  status: number,
): Promise<void> {
  const body = await smallBody(deps, file);
  const head = withRuleHeaders(
    res,
    {
      'Berth-Request-Id': requestId,
      'X-Content-Type-Options': 'nosniff',
      'Content-Type': file.contentType,
      'Cache-Control': 'no-store',
    },
    headers,
  );
  if (body) {
    res.writeHead(status, { ...head, 'Content-Length': body.length });
    res.end(req.method === 'HEAD' ? undefined : body);
  } else if (req.method === 'HEAD') {
    res.writeHead(status, head);
    res.end();
  } else {
    const stream = await streamBody(deps, file);
    res.writeHead(status, head);
    pipeline(stream, res, () => {});
  }
}

/**
 * A web file: 200, 206 for one byte range, 304 when the browser's copy is current. `whole` is its body
 * when the caller has it in memory already; otherwise a GET reads it (a small file, or a short range
 * of a larger one, then kept in the blob cache) or streams it from the store. Returns a promise only
 * when it reads.
 */
function sendFile(
  deps: Deps,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  file: CachedWebFile,
  requestId: string,
  headers: RuleHeaders,
  whole?: Buffer,
): Promise<void> | void {
  // no-cache: browsers may keep a copy but must revalidate, so a new upload shows on the next request.
  const validators: http.OutgoingHttpHeaders = {
    'Berth-Request-Id': requestId,
    'X-Content-Type-Options': 'nosniff',
    'Cache-Control': 'public, no-cache',
    'Accept-Ranges': 'bytes',
    ETag: file.etag,
    'Last-Modified': file.lastModified,
  };
  const conditional = req.headers['if-none-match'] !== undefined || req.headers['if-modified-since'] !== undefined;
  if (conditional && fresh(req.headers, { etag: file.etag, 'last-modified': file.lastModified })) {
    res.writeHead(304, withRuleHeaders(res, validators, headers));
    res.end();
    return;
  }
  const head = withRuleHeaders(
    res,
    { ...validators, 'Content-Type': file.contentType, 'Content-Length': file.bytes },
    headers,
  );

  let status = 200;
  let range: { start: number; end: number } | undefined;
  const rangeHeader = req.headers.range;
  const ifRange = req.headers['if-range'];
  if (rangeHeader && (!ifRange || ifRange === file.etag)) {
    const ranges = rangeParser(file.bytes, rangeHeader, { combine: true });
    if (ranges === -1) {
      res.writeHead(416, {
        'Berth-Request-Id': requestId,
        'Content-Range': `bytes */${file.bytes}`,
        'Content-Length': 0,
      });
      res.end();
      return;
    }
    // One range is served as 206; several are answered with the whole file, as RFC 9110 allows.
    if (ranges !== -2 && ranges.type === 'bytes' && ranges.length === 1) {
      range = ranges[0]!;
      status = 206;
      head['Content-Range'] = `bytes ${range.start}-${range.end}/${file.bytes}`;
      head['Content-Length'] = range.end - range.start + 1;
    }
  }

  if (req.method === 'HEAD') {
    res.writeHead(status, head);
    res.end();
    return;
  }
  if (whole) return sendWhole(res, status, head, whole, range);
  return smallBody(deps, file).then(async (body) => {
    if (body) return sendWhole(res, status, head, body, range);
    const part = range && (await rangeBody(deps, file, range));
    if (part) return sendWhole(res, status, head, part, undefined);
    const stream = await streamBody(deps, file, range);
    res.writeHead(status, head);
    pipeline(stream, res, () => {});
  });
}

function sendWhole(
  res: http.ServerResponse,
  status: number,
  head: http.OutgoingHttpHeaders,
  body: Buffer,
  range: { start: number; end: number } | undefined,
): void {
  res.writeHead(status, head);
  res.end(range ? body.subarray(range.start, range.end + 1) : body);
}
