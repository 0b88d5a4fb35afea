// Behind a proxy that terminates TLS (BERTH_TRUST_PROXY), a request's scheme, host and client address
// are the ones the proxy reports in X-Forwarded-Proto, -Host and -For; otherwise the connection's own.
// Koa's apps follow the same rules (app.proxy, and maxIpsCount 1: only the address the proxy itself
// appended counts, never what a client wrote in the header); these are them for Node's bare request.
import type http from 'node:http';
import type Koa from 'koa';
import type { Config } from '../config.ts';
import type { Deps } from '../deps.ts';

const first = (value: string | string[] | undefined): string | undefined =>
  (Array.isArray(value) ? value[0] : value)?.split(/\s*,\s*/, 1)[0] || undefined;

export function applyProxySetting(app: Koa, config: Pick<Config, 'trustProxy'>): void {
  app.proxy = config.trustProxy;
  app.maxIpsCount = 1;
}

export function requestHost(req: http.IncomingMessage, trustProxy: boolean): string {
  return (trustProxy && first(req.headers['x-forwarded-host'])) || first(req.headers.host) || '';
}

export function requestProtocol(req: http.IncomingMessage, trustProxy: boolean): 'http' | 'https' {
  if ((req.socket as { encrypted?: boolean }).encrypted) return 'https';
  return trustProxy && first(req.headers['x-forwarded-proto']) === 'https' ? 'https' : 'http';
}

/** HTTPS only for this host from now on, for a year: sent with every answer that came over HTTPS. */
export const STRICT_TRANSPORT_SECURITY = 'max-age=31536000';

/** Sets Strict-Transport-Security on the answer to a request that came over HTTPS (here, or to the proxy). */
export function strictTransport(req: http.IncomingMessage, res: http.ServerResponse, trustProxy: boolean): void {
  if (requestProtocol(req, trustProxy) === 'https')
    res.setHeader('Strict-Transport-Security', STRICT_TRANSPORT_SECURITY);
}

export function clientAddress(req: http.IncomingMessage, trustProxy: boolean): string {
  const forwarded = trustProxy ? req.headers['x-forwarded-for'] : undefined;
  const last = (Array.isArray(forwarded) ? forwarded.join(',') : forwarded)?.split(',').at(-1)?.trim();
  return last || req.socket.remoteAddress || '';
}

/**
 * The origin people reach the control plane at, for links in answers: BERTH_PUBLIC_URL when set,
 * else the scheme and host this request came to.
 */
export const publicOrigin = (ctx: Koa.Context, config: Pick<Config, 'publicUrl'>): string =>
  config.publicUrl || `${ctx.protocol}://${ctx.host}`;

/**
 * The origin a name of a site is served at, for a link that carries a one-use token: the scheme and
 * port of the sites' own URLs (`siteUrl`: BERTH_PUBLIC_URL, BERTH_TLS, else this server's port), or
 * behind a trusted proxy with no public URL, those the proxy reports for the request (`proxied`).
 * Never the scheme and port a caller came by, which may be plain http to a site served over https.
 */
export function servedOrigin(
  deps: Pick<Deps, 'config' | 'siteUrl'>,
  hostname: string,
  proxied: { protocol: string; host: string },
): string {
  const { trustProxy, publicUrl } = deps.config;
  // Every site's URL has the same scheme and port, whatever its label.
  const url = new URL(trustProxy && !publicUrl ? `${proxied.protocol}://${proxied.host}` : deps.siteUrl('site'));
  url.hostname = hostname;
  return url.origin;
}
