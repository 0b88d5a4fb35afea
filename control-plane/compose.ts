// The composition root: everything Berth is made of, built from Config in one place, and released in
// the reverse order. The HTTP server (server.ts) and the tests start from here; nothing else constructs
// a dependency.
import type http from 'node:http';
import type https from 'node:https';
import path from 'node:path';
import { CloseStack } from './close-stack.ts';
import { type Config, masterKeyFileOf } from './config.ts';
import { openMetadata } from './db/metadata.ts';
import { DomainChecks } from './domains/domain-checks.ts';
import { DeploymentExpiry } from './deployments/deployments.ts';
import { SiteNames } from './domains/site-names.ts';
import type { Logger } from './log.ts';
import { Metrics } from './metrics.ts';
import { type OwnerCredentials, ensureOwner } from './services/bootstrap.ts';
import { CronScheduler } from './services/cron.ts';
import { type Deps, monotonicClock } from './deps.ts';
import { failInterruptedExports } from './services/exports.ts';
import { closingDbLines, createCtxHandler, createDbLineHandler } from './services/function-context.ts';
import { FunctionLogBuffer } from './logs/function-log-buffer.ts';
import { openLogStreams } from './logs/log-streams.ts';
import { retiringFunctions } from './services/functions.ts';
import { PreviewCache } from './deployments/preview-cache.ts';
import { removePreviewModules } from './deployments/previews.ts';
import { HostingCache } from './services/hosting-cache.ts';
import { StorageQuota, storageByAccount } from './services/storage-quota.ts';
import { releaseLeftoverLeases } from './services/migrations.ts';
import { signInLimits } from './services/sessions.ts';
import { cliLoginLimit } from './services/cli-logins.ts';
import { NodeHeartbeat, defaultNodeId } from './cluster/nodes.ts';
import { readChannelTls } from './site-databases/cluster/channel-tls.ts';
import { composeSiteDatabases, replicationDirOf } from './site-databases/compose.ts';
import { replicatorConfigFile } from './site-databases/replication/replicator.ts';
import { openBlobStore, sweepUnreferencedBlobs } from './blob-stores.ts';
import { openDataDir } from '../storage/data-dir.ts';
import { loadMasterKey } from '../storage/master-key.ts';
import { stopLeftovers } from '../storage/leftover-processes.ts';
import { RuntimeHost, socketDirFor } from '../runtime-host/runtime.ts';
import { EgressProxy } from '../runtime-host/egress-proxy.ts';
import { type DataDirLock, lockDataDir } from '../storage/data-dir-lock.ts';
import { sweepTempFiles } from '../storage/temp-files.ts';
import { composeAnalytics } from './analytics/compose.ts';
import { blobStoreProblem, dataDirLockProblem, dataDirProblem, findDeno } from './startup-error.ts';

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
  /** Releases every part in the reverse order of their opening (close-stack.ts), the data dir's lock last. */
  close(): Promise<void>;
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
  const stack = new CloseStack();
  try {
    return await composeParts(config, options, denoPath, stack);
  } catch (err) {
    // Whatever the start had opened is released, the data dir's lock last, before the failure is reported.
    await stack.close().catch((closeErr: unknown) => log.error({ err: closeErr }, 'releasing a failed start failed'));
    throw err;
  }
}

async function composeParts(
  config: Config,
  options: ComposeOptions,
  denoPath: string,
  stack: CloseStack,
): Promise<Composed> {
  const { log } = options;
  let lock: DataDirLock;
  try {
    lock = lockDataDir(config.dataDir);
  } catch (err) {
    throw dataDirLockProblem(err);
  }
  stack.defer('the data dir lock', () => lock.release());
  const runtimeDir = path.join(config.dataDir, 'runtime');
  // The data dir is this process's now: what a killed server left running or half-written goes first.
  const stopped = await stopLeftovers(
    [config.dataDir, socketDirFor(runtimeDir)],
    [replicatorConfigFile(replicationDirOf(runtimeDir))],
  );
  if (stopped > 0) log.warn({ processes: stopped }, 'stopped the processes a previous server left running');
  const swept = sweepTempFiles(config.dataDir);
  if (swept > 0) log.warn({ files: swept }, 'removed the temp files a previous server left');
  // Files the start needs, read while nothing is open yet.
  const channelTls = readChannelTls(config.clusterTls);
  const nodeId = config.nodeId || defaultNodeId(config.dataDir);
  const masterKey = loadMasterKey(masterKeyFileOf(config));

  // The blob store first: a store that cannot be used stops the start with nothing else opened.
  const blobs = openBlobStore(config);
  stack.defer('the blob store', () => blobs.close());
  try {
    await blobs.init();
  } catch (err) {
    throw blobStoreProblem(err);
  }
  const metadata = await openMetadata(config, {
    deadlines: true,
    onConnectionError: (err) => log.warn({ err }, 'lost a connection to the metadata database'),
  });
  stack.defer('the metadata', () => metadata.close());
  const { db, hot: hotSql } = metadata;
  const metrics = new Metrics({
    db,
    storageByAccount: () => storageByAccount({ db }, config),
    metadataQueries: () => metadata.queries(),
    objectStoreRequests: () => blobs.requests,
  });
  const functionLogs = new FunctionLogBuffer({ db, log, perSite: config.functionLogsPerSite });
  stack.defer('the function logs', () => functionLogs.flush());
  const now = options.now ?? monotonicClock();
  const analytics = composeAnalytics(config, { db, now, testClock: options.now !== undefined, log }, stack);
  const siteDatabases = composeSiteDatabases(
    config,
    { metadata, denoPath, runtimeDir, masterKey, nodeId, tls: channelTls, metrics, log },
    stack,
  );
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
  stack.defer('the egress proxy', () => egress.close());
  const runtime = new RuntimeHost({
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
      started: (seconds, deployment) => {
        metrics.workerStarted(seconds);
        analytics.coldStart(deployment.siteId);
      },
      exited: (reason) => metrics.workerExited(reason),
    },
  });
  stack.defer('the runtime', () => runtime.close());
  metrics.read({ liveWorkers: () => runtime.workerCount });
  const changes = await metadata.openChanges((err) =>
    log.warn({ err }, 'lost the connection that hears other servers’ changes; reconnecting'),
  );
  stack.defer('the change feed', () => changes.close());
  const hostingCache = new HostingCache();
  changes.subscribe(hostingCache);
  // Previews' functions start again from their stored sources, like the workers that ran them.
  removePreviewModules(runtimeDir);
  const siteNames = new SiteNames(
    db,
    { siteHost: config.siteHost, instanceHost: config.publicUrl ? new URL(config.publicUrl).hostname : '' },
    log,
  );
  await siteNames.start();
  stack.defer('the custom domains', () => siteNames.stop());
  changes.subscribe(siteNames);
  changes.subscribe(retiringFunctions(runtime, runtimeDir));
  const logStreams = openLogStreams({ functionLogs, changes, log }, stack);

  const deps: Deps = {
    config,
    db,
    hotSql,
    changes,
    blobs,
    storageQuota: new StorageQuota(config, hotSql),
    log,
    hostingCache,
    previews: new PreviewCache(),
    siteNames,
    runtime,
    runtimeDir,
    functionLogs,
    analytics,
    logStreams,
    masterKey,
    siteDatabases: siteDatabases.provider,
    replicationStalled: () => siteDatabases.replicas?.replicator.stalled() ?? null,
    metrics,
    now,
    nodeId,
    signInLimits: signInLimits(metadata),
    cliLoginLimit: cliLoginLimit(metadata),
    siteUrl: options.siteUrl,
  };
  changes.subscribe(closingDbLines(deps));
  changes.subscribe(deps.previews);
  runtime.serve({
    ctx: createCtxHandler(deps),
    dbLine: createDbLineHandler(deps),
    log: (deployment, entry) => functionLogs.add(deployment.siteId, deployment.path, entry),
  });
  const heartbeat = new NodeHeartbeat(deps, config, {
    onBeat: (sentAt, stamped) => siteDatabases.heartbeat(sentAt, stamped),
    stamps: () => siteDatabases.stampsHeartbeat(),
    replication: () => siteDatabases.replicas?.report() ?? null,
  });
  await heartbeat.start();
  stack.defer('the heartbeat', () => heartbeat.stop());
  const channel = await siteDatabases.start(deps);
  const owner = await ensureOwner(deps, { email: config.ownerEmail });
  await failInterruptedExports(deps);
  await releaseLeftoverLeases(deps);
  const scheduler = new CronScheduler(deps);
  await scheduler.start(config.cronTickMs);
  stack.defer('the cron scheduler', () => scheduler.stop());
  stack.started('the domain checks', new DomainChecks(deps));
  stack.started('the deployments’ expiry', new DeploymentExpiry(deps));
  const sweeper = sweepUnreferencedBlobs(deps);
  if (sweeper) stack.defer('the blob sweeper', () => sweeper.stop());
  return { deps, owner, scheduler, channel, close: () => stack.close() };
}
