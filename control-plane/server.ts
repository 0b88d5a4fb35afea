// Starts a Berth instance: opens the data dir, listens on one port and dispatches each request by its
// Host header to a hosted site or to the control plane. Used by `berth serve` and by the tests.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Config } from './config.ts';
import { openMetaDb } from './db/connection.ts';
import { createApiApp } from './http/api-app.ts';
import { createHostingApp, siteSubdomain } from './http/hosting-app.ts';
import { createLogger, type Logger } from './log.ts';
import { type OwnerCredentials, ensureOwner } from './services/bootstrap.ts';
import { type Deps, monotonicClock } from './services/deps.ts';
import { CronScheduler } from './services/cron.ts';
import { failInterruptedExports } from './services/exports.ts';
import { createCtxHandler } from './services/function-context.ts';
import { FunctionLogBuffer } from './services/function-logs.ts';
import { HostingCache } from './services/hosting-cache.ts';
import { releaseLeftoverLeases } from './services/migrations.ts';
import { BlobStore } from '../storage/blob-store.ts';
import { openDataDir } from '../storage/data-dir.ts';
import { loadMasterKey } from '../storage/master-key.ts';
import { SiteDatabases } from '../storage/site-database.ts';
import { resolveDenoBinary } from '../runtime-host/deno-binary.ts';
import { RuntimeHost } from '../runtime-host/runtime.ts';
import { VERSION } from './version.ts';

export interface Berth {
  /** Control-plane base URL, e.g. http://127.0.0.1:8080 */
  url: string;
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

export async function startBerth(config: Config, options: StartOptions = {}): Promise<Berth> {
  const log = options.log ?? createLogger(config.logLevel);
  const tightened = await openDataDir(config.dataDir);
  if (tightened > 0) log.warn({ entries: tightened, dataDir: config.dataDir }, 'tightened the permissions of the data dir');
  const db = await openMetaDb(config.dataDir);
  const blobs = new BlobStore(path.join(config.dataDir, 'blobs'));
  await blobs.init();

  let boundPort = config.port;
  const runtimeDir = path.join(config.dataDir, 'runtime');
  const denoPath = resolveDenoBinary(config.denoPath);
  const functionLogs = new FunctionLogBuffer({ db, log, perSite: config.functionLogsPerSite });
  const runtime = new RuntimeHost(
    {
      denoPath,
      runtimeDir,
      heapMb: config.functionHeapMb,
      // Deno itself and ArrayBuffers live outside the V8 heap cap; allow them a fixed margin.
      rssLimitBytes: (config.functionHeapMb + 192) * 1024 * 1024,
      timeoutMs: config.functionTimeoutMs,
      idleMs: config.functionIdleMs,
      maxWorkers: config.maxWorkers,
      startupTimeoutMs: 10_000,
      logger: log,
      ...(options.workerNice !== undefined ? { workerNice: options.workerNice } : {}),
    },
    {
      ctx: (deployment, call) => serveCtx(deployment, call),
      log: (deployment, entry) => functionLogs.add(deployment.siteId, deployment.path, entry),
    },
  );
  const deps: Deps = {
    config,
    db,
    blobs,
    log,
    hostingCache: new HostingCache(),
    runtime,
    runtimeDir,
    functionLogs,
    masterKey: loadMasterKey(config.dataDir),
    siteDatabases: new SiteDatabases({
      dataDir: config.dataDir,
      denoPath,
      denoDir: path.join(runtimeDir, 'deno-dir'),
      statementTimeoutMs: config.databaseTimeoutMs,
      maxProcesses: config.maxDatabaseProcesses,
      idleMs: config.functionIdleMs,
    }),
    now: options.now ?? monotonicClock(),
    siteUrl: (subdomain) => `http://${subdomain}.${config.siteHost}${boundPort === 80 ? '' : `:${boundPort}`}/`,
  };
  const serveCtx = createCtxHandler(deps);
  const owner = await ensureOwner(deps);
  await failInterruptedExports(deps);
  await releaseLeftoverLeases(deps);
  const scheduler = new CronScheduler(deps);
  await scheduler.start(config.cronTickMs);

  const api = createApiApp(deps, VERSION).callback();
  const hosting = createHostingApp(deps).callback();
  let closing = false;
  const server = http.createServer((req, res) => {
    // While shutting down, finish this request but do not keep its connection open for another.
    if (closing) res.setHeader('Connection', 'close');
    return siteSubdomain(req.headers.host, config.siteHost) === null ? api(req, res) : hosting(req, res);
  });
  server.keepAliveTimeout = 65_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.bind, () => {
      server.off('error', reject);
      resolve();
    });
  });
  boundPort = (server.address() as AddressInfo).port;
  const host = config.bind.includes(':') ? `[${config.bind}]` : config.bind;

  let closed: Promise<void> | undefined;
  const close = () => {
    closed ??= (async () => {
      closing = true;
      const drained = new Promise<void>((resolve) => server.close(() => resolve()));
      // Keep-alive sockets become idle as their last request ends; close each one as soon as it does.
      const sweep = setInterval(() => server.closeIdleConnections(), 50);
      const force = setTimeout(() => server.closeAllConnections(), config.shutdownGraceMs);
      await drained;
      clearInterval(sweep);
      clearTimeout(force);
      await scheduler.stop();
      await runtime.close();
      await deps.siteDatabases.close();
      await functionLogs.flush();
      await db.destroy();
    })();
    return closed;
  };

  return { url: `http://${host}:${boundPort}`, port: boundPort, deps, owner, scheduler, close };
}
