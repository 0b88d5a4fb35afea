// The composition root: everything Berth is made of, built from Config in one place, and released in
// the reverse order. The HTTP server (server.ts) and the tests start from here; nothing else constructs
// a dependency.
import crypto from 'node:crypto';
import fs from 'node:fs';
import type http from 'node:http';
import type https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { type Config, masterKeyFileOf } from './config.ts';
import { openMetadata } from './db/metadata.ts';
import { logJobFailure } from './db/errors.ts';
import type { Logger } from './log.ts';
import { Metrics } from './metrics.ts';
import { type OwnerCredentials, ensureOwner } from './services/bootstrap.ts';
import { CronScheduler } from './services/cron.ts';
import { type Deps, monotonicClock } from './services/deps.ts';
import { failInterruptedExports } from './services/exports.ts';
import { createCtxHandler } from './services/function-context.ts';
import { FunctionLogBuffer } from './services/function-log-buffer.ts';
import { HostingCache } from './services/hosting-cache.ts';
import { StorageQuota, storageByAccount } from './services/storage-quota.ts';
import { releaseLeftoverLeases } from './services/migrations.ts';
import { signInLimits } from './services/sessions.ts';
import { cliLoginLimit } from './services/cli-logins.ts';
import { NodeHeartbeat } from './services/nodes.ts';
import { channelKey, RequestVerifier } from './cluster/channel-auth.ts';
import { ChannelClient, channelServer } from './cluster/database-channel.ts';
import { readChannelTls } from './cluster/channel-tls.ts';
import { PlacedSiteDatabases } from './cluster/placed-site-databases.ts';
import { DatabaseMover, releaseLeftoverMoves } from './cluster/database-move.ts';
import { DatabaseCopier } from './cluster/database-copies.ts';
import { adoptDataDir, settleLocalDatabases } from './cluster/local-databases.ts';
import { BlobSweeper } from '../storage/blob-sweeper.ts';
import { openBlobStore } from './blob-stores.ts';
import { openDataDir } from '../storage/data-dir.ts';
import { loadMasterKey } from '../storage/master-key.ts';
import { SiteDatabases } from '../storage/site-database.ts';
import { resolveDenoBinary } from '../runtime-host/deno-binary.ts';
import { stopLeftovers } from '../runtime-host/leftovers.ts';
import { RuntimeHost, socketDirFor } from '../runtime-host/runtime.ts';
import { removeDeployments } from '../runtime-host/deployments.ts';
import { EgressProxy } from '../runtime-host/egress-proxy.ts';
import { type DataDirLock, DataDirInUse, lockDataDir } from '../storage/data-dir-lock.ts';
import { sweepTempFiles } from '../storage/temp-files.ts';
import { StartupError, blobStoreProblem, dataDirProblem } from './startup-error.ts';

export interface ComposeOptions {
  log: Logger;
  /** The clock of schedules and timestamps; tests drive cron with their own. */
  now?: (() => Date) | undefined;
  /** How much lower function workers' CPU priority is than the server's (default 10); benches compare with 0. */
  workerNice?: number | undefined;
  /** The public address of a hosted site, known once the server has bound its port. */
  siteUrl: (subdomain: string) => string;
}

export interface Composed {
  deps: Deps;
  /** Set when this start created the owner account of an empty data dir. */
  owner: OwnerCredentials | null;
  scheduler: CronScheduler;
  /** The listener of the internal channel other nodes call, when BERTH_CLUSTER_ADDRESS is set; not yet listening. */
  channel: http.Server | https.Server | null;
  /** Stops the scheduler, workers and database processes, flushes logs and closes the metadata. */
  close(): Promise<void>;
}

/** The Deno executable functions and site databases run in, checked to be there and runnable. */
function findDeno(override: string | undefined): string {
  let denoPath: string;
  try {
    denoPath = resolveDenoBinary(override);
    fs.accessSync(denoPath, fs.constants.X_OK);
  } catch {
    throw new StartupError(
      override
        ? `BERTH_DENO is ${override}, which is not an executable file: point it at a deno binary, or unset it to use the one npm installed`
        : 'the Deno binary npm installs with Berth is missing: run `npm ci` (or `make install`) in the Berth folder, or set BERTH_DENO to a deno executable',
    );
  }
  return denoPath;
}

export async function compose(config: Config, options: ComposeOptions): Promise<Composed> {
  const { log } = options;
  // Found before anything is opened: nothing to release when it is missing.
  const denoPath = findDeno(config.denoPath);
  let tightened: number;
  try {
    tightened = await openDataDir(config.dataDir);
  } catch (err) {
    throw dataDirProblem(err, config.dataDir);
  }
  if (tightened > 0)
    log.warn({ entries: tightened, dataDir: config.dataDir }, 'tightened the permissions of the data dir');
  let lock: DataDirLock;
  try {
    lock = lockDataDir(config.dataDir);
  } catch (err) {
    if (err instanceof DataDirInUse) {
      throw new StartupError(
        `${err.message}: stop it first, or set BERTH_DATA_DIR to another folder (\`berth admin\` commands may run beside it)`,
      );
    }
    throw err;
  }
  const runtimeDir = path.join(config.dataDir, 'runtime');
  try {
    return await composeLocked(config, options, { denoPath, runtimeDir, lock });
  } catch (err) {
    lock.release();
    throw err;
  }
}

async function composeLocked(
  config: Config,
  options: ComposeOptions,
  held: { denoPath: string; runtimeDir: string; lock: DataDirLock },
): Promise<Composed> {
  const { log } = options;
  const { denoPath, runtimeDir, lock } = held;
  // The data dir is this process's now: what a killed server left running or half-written goes first.
  const stopped = await stopLeftovers([config.dataDir, socketDirFor(runtimeDir)]);
  if (stopped > 0) log.warn({ processes: stopped }, 'stopped the processes a previous server left running');
  const swept = sweepTempFiles(config.dataDir);
  if (swept > 0) log.warn({ files: swept }, 'removed the temp files a previous server left');
  // Files the start needs, read while nothing is open yet.
  const channelTls = readChannelTls(config.clusterTls);
  // The blob store first: a store that cannot be used stops the start with nothing else opened.
  const blobs = openBlobStore(config);
  try {
    await blobs.init();
  } catch (err) {
    await blobs.close();
    throw blobStoreProblem(err);
  }
  const metadata = await openMetadata(config, {
    deadlines: true,
    onConnectionError: (err) => log.warn({ err }, 'lost a connection to the metadata database'),
  });
  const { db, hot: hotSql } = metadata;

  const functionLogs = new FunctionLogBuffer({ db, log, perSite: config.functionLogsPerSite });
  const egress = await EgressProxy.start({
    perSite: config.egressConnectionsPerSite,
    dnsServers: config.egressDnsServers,
    connectTimeoutMs: 10_000,
    idleTimeoutMs: config.functionTimeoutMs,
    observer: {
      request: (siteId, outcome) => metrics.egressRequest(siteId, outcome),
      bytes: (siteId, direction, bytes) => metrics.egressBytes(siteId, direction, bytes),
      log: (grant, message) => functionLogs.add(grant.siteId, grant.path, { requestId: null, level: 'warn', message }),
    },
  });
  const metrics = new Metrics({
    db,
    liveWorkers: () => runtime.workerCount,
    storageByAccount: () => storageByAccount({ db }, config),
    metadataQueries: () => metadata.queries(),
    objectStoreRequests: () => blobs.requests,
    channelCalls: () => channelClient?.calls ?? 0,
  });
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
      memoryBudgetBytes: config.workerMemoryBytes,
      spareWorkers: config.spareWorkers,
      startupTimeoutMs: 10_000,
      logger: log,
      egress,
      ...(options.workerNice !== undefined ? { workerNice: options.workerNice } : {}),
      observer: {
        started: (seconds) => metrics.workerStarted(seconds),
        exited: (reason) => metrics.workerExited(reason),
      },
    },
    {
      // Served by services that need the runtime themselves: serveCtx is made once deps exist.
      ctx: (deployment, call) => serveCtx(deployment, call),
      log: (deployment, entry) => functionLogs.add(deployment.siteId, deployment.path, entry),
    },
  );
  const changes = await metadata.openChanges((err) =>
    log.warn({ err }, 'lost the connection that hears other servers’ changes; reconnecting'),
  );
  const hostingCache = new HostingCache();
  const nodeId = config.nodeId || defaultNodeId(config.dataDir);
  const masterKey = loadMasterKey(masterKeyFileOf(config));
  const localDatabases = new SiteDatabases({
    dataDir: config.dataDir,
    denoPath,
    denoDir: path.join(runtimeDir, 'deno-dir'),
    statementTimeoutMs: config.databaseTimeoutMs,
    maxProcesses: config.maxDatabaseProcesses,
    idleMs: config.functionIdleMs,
    maxBytes: config.siteDatabaseMaxBytes,
    onStatement: (access, ok, seconds) => metrics.statement(access, ok, seconds),
  });
  // On SQLite this server is the only node: every database is in its data dir. Shared metadata may
  // place a database on any node, and calls go where it is.
  const channelClient =
    metadata.backend === 'postgres' && config.clusterAddress
      ? new ChannelClient(channelKey(masterKey), nodeId, channelTls)
      : null;
  const placed =
    metadata.backend === 'postgres'
      ? new PlacedSiteDatabases({
          db,
          nodeId,
          local: localDatabases,
          channel: channelClient,
          statementTimeoutMs: config.databaseTimeoutMs,
        })
      : null;
  changes.subscribe({
    change(change) {
      switch (change.kind) {
        case 'file':
          return hostingCache.forgetFile(change.bucketId, change.path);
        case 'sites':
          return hostingCache.forgetSites();
        case 'database':
          placed?.forget(change.siteId);
          return hostingCache.forgetDatabase(change.siteId);
        case 'function':
          hostingCache.forgetFunction(change.siteId, change.name);
          runtime.retire(change.functionId);
          return removeDeployments(runtimeDir, change.functionId, change.versionId ?? undefined);
      }
    },
    resync: () => {
      hostingCache.clear();
      placed?.forgetAll();
    },
  });
  const deps: Deps = {
    config,
    db,
    hotSql,
    changes,
    blobs,
    storageQuota: new StorageQuota(config, hotSql),
    log,
    hostingCache,
    runtime,
    runtimeDir,
    functionLogs,
    masterKey,
    siteDatabases: placed ?? localDatabases,
    metrics,
    now: options.now ?? monotonicClock(),
    nodeId,
    signInLimits: signInLimits(metadata),
    cliLoginLimit: cliLoginLimit(metadata),
    siteUrl: options.siteUrl,
  };
  const serveCtx = createCtxHandler(deps);
  const heartbeat = new NodeHeartbeat(deps, config);
  await heartbeat.start();
  await adoptDataDir(deps, config.dataDir, metadata.backend === 'postgres');
  if (metadata.backend === 'postgres') {
    await releaseLeftoverMoves(db, nodeId, log);
    const { claimed } = await settleLocalDatabases(deps, config.dataDir);
    if (claimed > 0) log.info({ databases: claimed, node: nodeId }, 'recorded the site databases this node holds');
  } else {
    // On SQLite this server is the only node: every database is in its data dir, whatever id it had.
    await db('databases').whereNot({ node_id: nodeId }).orWhereNull('node_id').update({ node_id: nodeId });
  }
  // Copies of the databases this node holds go to the shared store, for recovery on another node.
  const copier =
    metadata.backend === 'postgres'
      ? new DatabaseCopier({
          db,
          nodeId,
          blobs,
          dataDir: config.dataDir,
          tmpDir: path.join(config.dataDir, 'sites', 'copies.tmp'),
          log,
        })
      : null;
  if (copier && config.roles.includes('database') && config.databaseCopyMs > 0) copier.start(config.databaseCopyMs);
  const mover =
    channelClient && copier
      ? new DatabaseMover({ db, nodeId, local: localDatabases, channel: channelClient, changes, blobs, copier, log })
      : null;
  const channel =
    placed && mover
      ? channelServer({
          verifier: new RequestVerifier(channelKey(masterKey)),
          provider: localDatabases,
          // A node asked about a database it does not take to be its own looks again, so a placement
          // cached from before a move does not send a caller away from the node that now holds it.
          whereIs: async (siteId) => {
            const where = await placed.whereIs(siteId);
            if (where === 'here') return where;
            placed.forget(siteId);
            return placed.whereIs(siteId);
          },
          moveOut: (siteId, to) => mover.moveOut(siteId, to),
          recoverHere: (siteId, from) => mover.recoverHere(siteId, from),
          maxReceiveBytes: config.siteDatabaseMaxBytes + 1024 * 1024,
          tmpDir: path.join(runtimeDir, 'channel'),
          tls: channelTls,
          log,
        })
      : null;
  const owner = await ensureOwner(deps, { email: config.ownerEmail });
  await failInterruptedExports(deps);
  await releaseLeftoverLeases(deps);
  const scheduler = new CronScheduler(deps);
  await scheduler.start(config.cronTickMs);
  const sweeper = new BlobSweeper(
    blobs,
    async (sha256) =>
      (await hotSql.get('SELECT 1 FROM file_versions WHERE blob_sha256 = ? LIMIT 1', sha256)) !== undefined,
    config.blobSweepMs,
  );
  if (config.blobSweepMs > 0) {
    sweeper.start(
      config.blobSweepMs,
      ({ removed, bytes, leftovers }) =>
        (removed > 0 || leftovers > 0) &&
        log.info({ blobs: removed, bytes, leftovers }, 'removed blobs no file version references'),
      (err) => logJobFailure(log, err, 'sweeping unreferenced blobs failed'),
    );
  }

  const close = async () => {
    await sweeper.stop();
    await scheduler.stop();
    await heartbeat.stop();
    await copier?.stop();
    await runtime.close();
    await egress.close();
    await deps.siteDatabases.close();
    await functionLogs.flush();
    await changes.close();
    await blobs.close();
    await metadata.close();
    lock.release();
  };
  return { deps, owner, scheduler, channel, close };
}

/**
 * This node's id when BERTH_NODE_ID is unset: its host and a digest of its data dir, stable across
 * restarts (whatever port it listens on) and distinct for two servers on one host; the path itself
 * stays out of the metadata.
 */
function defaultNodeId(dataDir: string): string {
  return `${os.hostname()}:${crypto.createHash('sha256').update(path.resolve(dataDir)).digest('hex').slice(0, 12)}`;
}
