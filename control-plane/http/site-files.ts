// GET and HEAD of a site's web files, straight on Node's request and response: the private-site gate,
// /web files by path with conditional and range requests, directories with their index.html, and the
// site's own 404.html. The hottest path of hosting skips the Koa stack but keeps its rules (request id,
// one log line, the error envelope) through the same helpers.
import type http from 'node:http';
import { pipeline } from 'node:stream';
import fresh from 'fresh';
import rangeParser from 'range-parser';
import type { Deps } from '../services/deps.ts';
import type { CachedSite, CachedWebFile } from '../services/hosting-cache.ts';
import { resolveSite, resolveWebFile, smallBody, streamBody } from '../services/hosting.ts';
import { siteReader } from '../services/site-sessions.ts';
import { type SiteRequestHandler, leanSiteHandler, sendHtml } from './bare-response.ts';
import { SESSION_COOKIE } from './function-endpoint.ts';
import { noSitePage, notFoundPage, notMemberPage, privateSitePage } from './pages.ts';
import { requestHost, requestProtocol } from './proxy.ts';
import { urlPath } from './site-paths.ts';

export const siteFilesHandler = (deps: Deps): SiteRequestHandler => leanSiteHandler(deps, 'web', (req, res, subdomain, segments) => serve(deps, req, res, subdomain, segments));

async function serve(deps: Deps, req: http.IncomingMessage, res: http.ServerResponse, subdomain: string, segments: string[]): Promise<void> {
  const site = await resolveSite(deps, subdomain);
  if (!site || site.status !== 'ACTIVE') return sendHtml(res, 404, noSitePage);
  if (site.access === 'PRIVATE' && !(await mayRead(deps, req, res, site))) return;

  const wantsDirectory = segments.at(-1) === '';
  const relative = segments.join('/');
  const file = await resolveWebFile(deps, site.bucketId, wantsDirectory ? `web/${relative}index.html` : `web/${relative}`);
  if (file) return sendFile(deps, req, res, file);

  // "/docs" where "web/docs/index.html" exists: send the browser to "/docs/" so relative links work.
  if (!wantsDirectory && (await resolveWebFile(deps, site.bucketId, `web/${relative}/index.html`))) {
    const [path, query] = splitQuery(req.url ?? '/');
    res.writeHead(308, { Location: `${urlPath(path)}/${query}`, 'Content-Length': 0 });
    res.end();
    return;
  }

  const custom404 = await resolveWebFile(deps, site.bucketId, 'web/404.html');
  if (custom404) return sendFile(deps, req, res, custom404, 404);
  sendHtml(res, 404, notFoundPage);
}

const splitQuery = (url: string): [string, string] => {
  const at = url.indexOf('?');
  return at === -1 ? [url, ''] : [url.slice(0, at), url.slice(at)];
};

/** The private-site gate: members of the owning account read on; others get the sign-in or 403 page. */
async function mayRead(deps: Deps, req: http.IncomingMessage, res: http.ServerResponse, site: CachedSite): Promise<boolean> {
  const token = cookie(req, SESSION_COOKIE);
  const reader = token ? await siteReader(deps, token, site) : null;
  if (reader === 'member') return true;
  if (reader === 'stranger') {
    sendHtml(res, 403, notMemberPage);
    return false;
  }
  const [path, query] = splitQuery(req.url ?? '/');
  const next = `${urlPath(path)}${query}`;
  sendHtml(res, 401, privateSitePage(`${controlPlaneOrigin(deps, req)}/login?${new URLSearchParams({ site: site.id, next })}`));
  return false;
}

/** A cookie's raw value from the request, the first of that name. */
function cookie(req: http.IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at !== -1 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}

/** The control plane as the browser reaches it from this site: the public URL, or the site host without the subdomain. */
export function controlPlaneOrigin(deps: Deps, req: http.IncomingMessage): string {
  if (deps.config.publicUrl) return deps.config.publicUrl;
  const port = /:(\d+)$/.exec(requestHost(req, deps.config.trustProxy))?.[1];
  return `${requestProtocol(req, deps.config.trustProxy)}://${deps.config.siteHost}${port ? `:${port}` : ''}`;
}

async function sendFile(deps: Deps, req: http.IncomingMessage, res: http.ServerResponse, file: CachedWebFile, status = 200): Promise<void> {
  res.setHeader('X-Content-Type-Options', 'nosniff');
  if (status !== 200) {
    const body = await smallBody(deps, file);
    res.setHeader('Content-Type', file.contentType);
    res.setHeader('Cache-Control', 'no-store');
    res.statusCode = status;
    if (body) {
      res.setHeader('Content-Length', body.length);
      res.end(req.method === 'HEAD' ? undefined : body);
    } else if (req.method === 'HEAD') {
      res.end();
    } else {
      pipeline(await streamBody(deps, file), res, () => {});
    }
    return;
  }
  // no-cache: browsers may keep a copy but must revalidate, so a new upload shows on the next request.
  res.setHeader('Cache-Control', 'public, no-cache');
  res.setHeader('Accept-Ranges', 'bytes');
  res.setHeader('ETag', file.etag);
  res.setHeader('Last-Modified', file.lastModified);
  if (fresh(req.headers, { etag: file.etag, 'last-modified': file.lastModified })) {
    res.statusCode = 304;
    res.end();
    return;
  }
  res.setHeader('Content-Type', file.contentType);

  let range: { start: number; end: number } | undefined;
  const rangeHeader = req.headers.range;
  const ifRange = req.headers['if-range'];
  if (rangeHeader && (!ifRange || ifRange === file.etag)) {
    const ranges = rangeParser(file.bytes, rangeHeader, { combine: true });
    if (ranges === -1) {
      res.writeHead(416, { 'Content-Range': `bytes */${file.bytes}`, 'Content-Length': 0 });
      res.end();
      return;
    }
    // One range is served as 206; several are answered with the whole file, as RFC 9110 allows.
    if (ranges !== -2 && ranges.type === 'bytes' && ranges.length === 1) {
      range = ranges[0]!;
      res.statusCode = 206;
      res.setHeader('Content-Range', `bytes ${range.start}-${range.end}/${file.bytes}`);
    }
  }

  const length = range ? range.end - range.start + 1 : file.bytes;
  res.setHeader('Content-Length', length);
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  const whole = await smallBody(deps, file);
  if (whole) res.end(range ? whole.subarray(range.start, range.end + 1) : whole);
  else pipeline(await streamBody(deps, file, range), res, () => {});
}
