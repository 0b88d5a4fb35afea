// GET and HEAD of a site's web files, straight on Node's request and response: the private-site gate,
// /web files by path with conditional and range requests, directories with their index.html, and the
// site's own 404.html; on a preview host, the preview's files (deployments/previews.ts), to members only
// unless its deployment's preview is PUBLIC. The hottest path of hosting skips the Koa stack but keeps its rules (request id,
// one log line, the error envelope) through the same helpers. A public site's file whose lookups and
// bytes are cached is answered without waiting on anything: one head written whole, one write.
import type http from 'node:http';
import { pipeline } from 'node:stream';
import fresh from 'fresh';
import rangeParser from 'range-parser';
import type { Deps } from '../deps.ts';
import { previewFile, resolvePreview } from '../deployments/previews.ts';
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
import { mayRead } from './member-gate.ts';
import { noSitePage, notFoundPage } from './pages.ts';
import { urlPath } from './site-paths.ts';

export const siteFilesHandler = (deps: Deps): SiteRequestHandler =>
  leanSiteHandler(deps, 'web', (req, res, subdomain, segments, requestId, preview) =>
    preview === undefined
      ? serve(deps, req, res, subdomain, segments, requestId)
      : servePreview(deps, req, res, subdomain, preview, segments, requestId),
  );

/** What a path holds: a full bucket path (e.g. "web/index.html") to the file served there, or null. */
type FileLookup = (path: string) => Promise<CachedWebFile | null>;

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
  await serveWeb(deps, req, res, segments, requestId, (path) => previewFile(deps, preview, path));
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
    return resolveSite(deps, subdomain).then((found) => serveSite(deps, req, res, found, segments, requestId));
  return serveSite(deps, req, res, site, segments, requestId);
}

function serveSite(
  deps: Deps,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  site: CachedSite | null,
  segments: string[],
  requestId: string,
): Promise<void> | void {
  if (site?.status !== 'ACTIVE') return sendHtml(res, 404, noSitePage, requestId);
  if (site.access === 'PRIVATE') return servePrivate(deps, req, res, site, segments, requestId);
  // The common case first: the file named, its lookup and its bytes cached.
  if (segments.at(-1) !== '') {
    const file = cachedWebFile(deps, site.bucketId, `web/${segments.join('/')}`);
    if (file) {
      const body = cachedBody(deps, file);
      if (body) return sendFile(deps, req, res, file, requestId, body);
    }
  }
  return serveWeb(deps, req, res, segments, requestId, live(deps, site));
}

async function servePrivate(
  deps: Deps,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  site: CachedSite,
  segments: string[],
  requestId: string,
): Promise<void> {
  if (await mayRead(deps, req, res, site, requestId))
    await serveWeb(deps, req, res, segments, requestId, live(deps, site));
}

/** The site's current files. */
const live =
  (deps: Deps, site: CachedSite): FileLookup =>
  (path) =>
    resolveWebFile(deps, site, path);

async function serveWeb(
  deps: Deps,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  segments: string[],
  requestId: string,
  lookup: FileLookup,
): Promise<void> {
  const wantsDirectory = segments.at(-1) === '';
  const relative = segments.join('/');
  const file = await lookup(wantsDirectory ? `web/${relative}index.html` : `web/${relative}`);
  if (file) return sendFile(deps, req, res, file, requestId);

  // "/docs" where "web/docs/index.html" exists: send the browser to "/docs/" so relative links work.
  if (!wantsDirectory && (await lookup(`web/${relative}/index.html`))) {
    const [path, query] = splitQuery(req.url ?? '/');
    res.writeHead(308, { 'Berth-Request-Id': requestId, Location: `${urlPath(path)}/${query}`, 'Content-Length': 0 });
    res.end();
    return;
  }

  const custom404 = await lookup('web/404.html');
  if (custom404) return sendNotFound(deps, req, res, custom404, requestId);
  sendHtml(res, 404, notFoundPage, requestId);
}

const splitQuery = (url: string): [string, string] => {
  const at = url.indexOf('?');
  return at === -1 ? [url, ''] : [url.slice(0, at), url.slice(at)];
};

/** The site's own 404.html, never cached by browsers. */
async function sendNotFound(
  deps: Deps,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  file: CachedWebFile,
  requestId: string,
): Promise<void> {
  const body = await smallBody(deps, file);
  const head: http.OutgoingHttpHeaders = {
    'Berth-Request-Id': requestId,
    'X-Content-Type-Options': 'nosniff',
    'Content-Type': file.contentType,
    'Cache-Control': 'no-store',
  };
  if (body) {
    res.writeHead(404, { ...head, 'Content-Length': body.length });
    res.end(req.method === 'HEAD' ? undefined : body);
  } else if (req.method === 'HEAD') {
    res.writeHead(404, head);
    res.end();
  } else {
    const stream = await streamBody(deps, file);
    res.writeHead(404, head);
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
  whole?: Buffer,
): Promise<void> | void {
  const conditional = req.headers['if-none-match'] !== undefined || req.headers['if-modified-since'] !== undefined;
  if (conditional && fresh(req.headers, { etag: file.etag, 'last-modified': file.lastModified })) {
    // no-cache: browsers may keep a copy but must revalidate, so a new upload shows on the next request.
    res.writeHead(304, {
      'Berth-Request-Id': requestId,
      'X-Content-Type-Options': 'nosniff',
      'Cache-Control': 'public, no-cache',
      'Accept-Ranges': 'bytes',
      ETag: file.etag,
      'Last-Modified': file.lastModified,
    });
    res.end();
    return;
  }
  const head: http.OutgoingHttpHeaders = {
    'Berth-Request-Id': requestId,
    'X-Content-Type-Options': 'nosniff',
    'Cache-Control': 'public, no-cache',
    'Accept-Ranges': 'bytes',
    ETag: file.etag,
    'Last-Modified': file.lastModified,
    'Content-Type': file.contentType,
    'Content-Length': file.bytes,
  };

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
