// Starts a Berth instance: composes it (compose.ts), listens on the main port and on the listeners the
// parts serve (HTTPS and port 80 with BERTH_TLS=acme, the metrics', the cluster's), each closed through
// the start's stack, and dispatches each request by its Host header to a hosted site or to the control
// plane. Used by `berth serve` and by the tests.
import http from 'node:http';
import type https from 'node:https';
import type { AddressInfo } from 'node:net';
import { compose } from './compose.ts';
import type { Config } from './config.ts';
import { createApiApp } from './http/api-app.ts';
import { functionHandler } from './http/function-endpoint.ts';
import { createHostingApp } from './http/hosting-app.ts';
import { leanApiHandler } from './http/lean-api.ts';
import { siteFilesHandler } from './http/site-files.ts';
import { redirectToCanonical, siteRoute } from './http/site-paths.ts';
import type { HostRoute } from './domains/site-names.ts';
import { createLogger, type Logger } from './log.ts';
import type { OwnerCredentials } from './services/bootstrap.ts';
import type { CronScheduler } from './services/cron.ts';
import type { Deps } from './deps.ts';
import { requestHost, strictTransport } from './http/proxy.ts';
import type { PartListener } from './part.ts';
import { listenProblem } from './startup-error.ts';
import { VERSION } from './version.ts';

/** How long a stopping server goes on accepting connections, and idle ones may bring in a request already sent. */
const ACCEPT_LINGER_MS = 1000;

export interface Berth {
  /** Control-plane base URL as bound, e.g. http://127.0.0.1:8080 */
  url: string;
  /** Where people reach the control plane: BERTH_PUBLIC_URL, or `url`. */
  publicUrl: string;
  /** The metrics listener's /metrics, when BERTH_METRICS_ADDRESS is set. */
  metricsUrl?: string;
  port: number;
  deps: Deps;
  /** Set when this start created the owner account of an empty data dir. */
  owner: OwnerCredentials | null;
  /** Runs due cron jobs; ticks by itself every BERTH_CRON_TICK_MS. */
  scheduler: CronScheduler;
  /** Stops accepting connections, lets requests in flight finish, then releases the data dir. */
  close(): Promise<void>;
}

export interface StartOptions {
  log?: Logger;
  /** The clock of schedules and timestamps; tests drive cron with their own. */
  now?: () => Date;
  /** How much lower function workers' CPU priority is than the server's (default 10); benches compare with 0. */
  workerNice?: number;
}

/**
 * Where a site is reached: by the public URL's scheme and port when there is one, else over HTTPS when
 * Berth serves it (BERTH_TLS), else by this server's port.
 */
function siteUrl(config: Config, subdomain: string, boundPort: number): string {
  if (config.publicUrl) {
    const pub = new URL(config.publicUrl);
    return `${pub.protocol}//${subdomain}.${config.siteHost}${pub.port ? `:${pub.port}` : ''}/`;
  }
  if (config.tls) {
    const port = config.tls.httpsPort;
    return `https://${subdomain}.${config.siteHost}${port === 443 ? '' : `:${port}`}/`;
  }
  return `http://${subdomain}.${config.siteHost}${boundPort === 80 ? '' : `:${boundPort}`}/`;
}

function listen(
  server: http.Server | https.Server,
  bind: string,
  port: number,
  names?: { port: string; bind: string },
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const failed = (err: Error) => reject(listenProblem(err, bind, port, names));
    server.once('error', failed);
    server.listen(port, bind, () => {
      server.off('error', failed);
      resolve();
    });
  });
}

/** Stops accepting other nodes' calls and waits for the ones in flight (each bounded by its own time limit). */
function closeCalls(listener: http.Server | https.Server): Promise<void> {
  return new Promise<void>((resolve) => {
    listener.close(() => resolve());
    listener.closeIdleConnections();
    const sweep = setInterval(() => listener.closeIdleConnections(), 50);
    listener.once('close', () => clearInterval(sweep));
  });
}

/**
 * Stops a public listener: it goes on accepting for a moment first, since connections a client opened
 * just before the signal may still wait in the kernel's accept queue of a busy server, and closing the
 * listener would reset them (meanwhile every answer says Connection: close). Then the listener closes
 * (and with it the connections idle now), and each other one as soon as it is idle; after the grace
 * period, every one.
 */
async function drain(server: http.Server | https.Server, graceMs: number): Promise<void> {
  const drained = new Promise<void>((resolve) => server.once('close', () => resolve()));
  let sweep: NodeJS.Timeout | undefined;
  const linger = setTimeout(
    () => {
      server.close();
      sweep = setInterval(() => server.closeIdleConnections(), 50);
    },
    Math.min(ACCEPT_LINGER_MS, graceMs),
  );
  const force = setTimeout(() => server.closeAllConnections(), graceMs);
  await drained;
  clearTimeout(linger);
  clearInterval(sweep);
  clearTimeout(force);
}

/** The listeners whose ports are named in full first: a public port of 0 (any free one) can then not take one of them. */
const BIND_ORDER: Record<PartListener['kind'], number> = { calls: 0, private: 1, public: 2 };

export async function startBerth(config: Config, options: StartOptions = {}): Promise<Berth> {
  const log = options.log ?? createLogger(config.logLevel);
  let boundPort = config.port;
  const composed = await compose(config, {
    log,
    now: options.now,
    workerNice: options.workerNice,
    siteUrl: (subdomain) => siteUrl(config, subdomain, boundPort),
  });
  const { deps, stack } = composed;

  const api = createApiApp(deps, VERSION).callback();
  const leanApi = leanApiHandler(deps);
  const hosting = createHostingApp(deps).callback();
  const functions = functionHandler(deps);
  const files = siteFilesHandler(deps);
  let closing = false;
  const dispatch = (req: http.IncomingMessage, res: http.ServerResponse, to: HostRoute) => {
    if (to.to === 'control') {
      if (!leanApi(req, res)) api(req, res);
      return;
    }
    if (to.to === 'redirect') return redirectToCanonical(req, res, to.hostname, config.trustProxy);
    if (to.to === 'unknown') return hosting(req, res);
    // A preview is never indexed: every answer on its host says so, errors included.
    if (to.preview !== undefined) res.setHeader('X-Robots-Tag', 'noindex');
    const route = siteRoute(req);
    if (route.to === 'function') return functions(req, res, to.subdomain, route.segments, to.preview);
    if (route.to === 'files') return files(req, res, to.subdomain, route.segments, to.preview);
    return hosting(req, res);
  };
  /** Every listener's requests: by Host to a site (its subdomain or a custom domain) or the control plane. */
  const handle = (req: http.IncomingMessage, res: http.ServerResponse) => {
    // While shutting down, finish this request but do not keep its connection open for another.
    if (closing) res.setHeader('Connection', 'close');
    strictTransport(req, res, config.trustProxy);
    const to = deps.siteNames.route(requestHost(req, config.trustProxy));
    if (!(to instanceof Promise)) return dispatch(req, res, to);
    void to.then((found) => dispatch(req, res, found));
  };
  const server = http.createServer(handle);
  server.keepAliveTimeout = 65_000;
  const bound: PartListener[] = [];
  let started = false;
  // Closed first of all: the public listeners drain (on a failed start, they just close), then the
  // metrics' listener closes, and other nodes' calls are answered until this node's own are, since its
  // databases close after this.
  stack.defer('the listeners', async () => {
    closing = true;
    // Live log streams never finish by themselves: end them so their connections go idle and close.
    deps.logStreams.close();
    const of = (kind: PartListener['kind']) => bound.filter((listener) => listener.kind === kind);
    const graceMs = started ? config.shutdownGraceMs : 0;
    await Promise.all(of('public').map((listener) => drain(listener.server, graceMs)));
    for (const listener of of('private')) listener.server.close();
    for (const listener of of('calls')) await closeCalls(listener.server);
  });
  try {
    const listeners = [
      ...composed.listeners(handle),
      { server, host: config.bind, port: config.port, kind: 'public' as const },
    ].sort((a, b) => BIND_ORDER[a.kind] - BIND_ORDER[b.kind]);
    for (const listener of listeners) {
      await listen(listener.server, listener.host, listener.port, listener.names);
      bound.push(listener);
    }
  } catch (err) {
    // Nothing was served: release what was composed, so the data dir is left as it was found.
    await composed
      .close()
      .catch((closeErr: unknown) => log.error({ err: closeErr }, 'releasing a failed start failed'));
    throw err;
  }
  started = true;
  boundPort = (server.address() as AddressInfo).port;
  const host = config.bind.includes(':') ? `[${config.bind}]` : config.bind;

  let closed: Promise<void> | undefined;
  const close = () => {
    closed ??= composed.close();
    return closed;
  };

  const url = `http://${host}:${boundPort}`;
  const metricsListener = bound.find((listener) => listener.path === '/metrics');
  const metricsAddress = metricsListener?.server.address() as AddressInfo | undefined;
  const metricsUrl = metricsAddress
    ? `http://${metricsAddress.family === 'IPv6' ? `[${metricsAddress.address}]` : metricsAddress.address}:${metricsAddress.port}/metrics`
    : undefined;
  return {
    url,
    publicUrl: config.publicUrl || url,
    ...(metricsUrl ? { metricsUrl } : {}),
    port: boundPort,
    deps,
    owner: composed.owner,
    scheduler: composed.scheduler,
    close,
  };
}
