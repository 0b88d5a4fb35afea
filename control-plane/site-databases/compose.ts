// The site databases' part of a start. On unshared metadata (SQLite) a server is alone: every site
// database is in its data dir and its own provider serves them. On shared metadata (PostgreSQL) each
// database is placed on a node: calls go where it is (over the internal channel when that is another
// node), and a node that takes part in the channel (BERTH_CLUSTER_ADDRESS) answers other nodes' calls,
// keeps copies of the databases it holds in the blob store, and moves or recovers databases when asked.
import type http from 'node:http';
import type https from 'node:https';
import path from 'node:path';
import { type Config, replicaDirOf } from '../config.ts';
import type { Logger } from '../log.ts';
import type { CloseStack } from '../close-stack.ts';
import type { Metadata } from '../db/metadata.ts';
import type { Deps } from '../services/deps.ts';
import type { Metrics } from '../metrics.ts';
import { SiteDatabases } from './local-provider.ts';
import type { SiteDatabaseProvider } from './provider.ts';
import { adoptDataDir, claimEveryDatabase, settleLocalDatabases } from './data-dir.ts';
import { channelKey, RequestVerifier } from './cluster/channel-auth.ts';
import { type ChannelTls, ChannelClient, channelServer } from './cluster/channel.ts';
import { DatabaseCopier } from './cluster/copies.ts';
import { DatabaseMover, releaseLeftoverMoves } from './cluster/move.ts';
import { PlacedSiteDatabases } from './cluster/placed-provider.ts';
import type { ReplicaTarget, ReplicationTiming } from './replication/litestream.ts';
import { SiteReplicas } from './replication/site-replicas.ts';

export interface SiteDatabaseParts {
  metadata: Metadata;
  denoPath: string;
  /** The runtime's folder: Deno's module cache and the channel's temp files live in it. */
  runtimeDir: string;
  masterKey: Buffer;
  nodeId: string;
  /** The internal channel's TLS files, read at the start (cluster/channel-tls.ts). */
  tls: ChannelTls | null;
  metrics: Metrics;
  log: Logger;
}

/** The replicator's configuration and its commands' files, in the runtime folder. */
export const replicationDirOf = (runtimeDir: string): string => path.join(runtimeDir, 'replication');

/** Replicas go to the object store when there is one (`database-replicas/` under its prefix), else to a folder. */
export function replicaTarget(config: Config): ReplicaTarget {
  const store = config.objectStore;
  if (!store) return { kind: 'dir', dir: path.resolve(replicaDirOf(config)) };
  return {
    kind: 's3',
    bucket: store.bucket,
    prefix: store.prefix,
    region: store.region,
    forcePathStyle: store.forcePathStyle,
    ...(store.endpoint ? { endpoint: store.endpoint } : {}),
  };
}

/** A full copy of a database daily (or within its retention, when that is shorter). */
const SNAPSHOT_INTERVAL_MS = 24 * 3600_000;

export const replicationTiming = (config: Config): ReplicationTiming => ({
  retentionMs: config.databaseRetentionMs,
  snapshotIntervalMs: Math.min(SNAPSHOT_INTERVAL_MS, config.databaseRetentionMs),
});

export interface ComposedSiteDatabases {
  /** The provider services use. */
  provider: SiteDatabaseProvider;
  /** The databases in this node's data dir. */
  local: SiteDatabases;
  /** Set on shared metadata: where each database is placed, cached and forgotten on the change feed. */
  placed: PlacedSiteDatabases | null;
  /**
   * Settles this node's data dir against the metadata and, on shared metadata, starts the node's part
   * in the cluster. Returns the channel's listener, not yet listening, when this node takes part in it.
   */
  start(deps: Deps): Promise<http.Server | https.Server | null>;
}

/**
 * The site database provider for this node: its own, or one that routes each call to where the
 * database is. What it opens, now and in start(), is released by `stack`.
 */
export function composeSiteDatabases(
  config: Config,
  parts: SiteDatabaseParts,
  stack: CloseStack,
): ComposedSiteDatabases {
  const { metadata, metrics } = parts;
  const replicas = config.databaseReplication
    ? new SiteReplicas({
        target: replicaTarget(config),
        timing: replicationTiming(config),
        workDir: replicationDirOf(parts.runtimeDir),
        log: parts.log,
      })
    : null;
  // Closed after the provider: the engine ships what the last statements wrote as it stops.
  if (replicas) stack.defer('the database replicas', () => replicas.close());
  const local = new SiteDatabases({
    dataDir: config.dataDir,
    denoPath: parts.denoPath,
    denoDir: path.join(parts.runtimeDir, 'deno-dir'),
    statementTimeoutMs: config.databaseTimeoutMs,
    maxProcesses: config.maxDatabaseProcesses,
    idleMs: config.functionIdleMs,
    maxBytes: config.siteDatabaseMaxBytes,
    onStatement: (access, ok, seconds) => metrics.statement(access, ok, seconds),
    replicas,
  });
  if (!metadata.shared) {
    stack.defer('the site databases', () => local.close());
    return {
      provider: local,
      local,
      placed: null,
      start: async (deps) => {
        await adoptDataDir(deps, config.dataDir, false);
        await claimEveryDatabase(deps.db, deps.nodeId);
        await local.resumeReplication();
        return null;
      },
    };
  }
  const client = config.clusterAddress ? new ChannelClient(channelKey(parts.masterKey), parts.nodeId, parts.tls) : null;
  if (client) metrics.read({ channelCalls: () => client.calls });
  const placed = new PlacedSiteDatabases({
    db: metadata.db,
    nodeId: parts.nodeId,
    local,
    channel: client,
    statementTimeoutMs: config.databaseTimeoutMs,
  });
  stack.defer('the site databases', () => placed.close());
  return {
    provider: placed,
    local,
    placed,
    start: async (deps) => {
      const { db, nodeId, log } = deps;
      deps.changes.subscribe(placed);
      await adoptDataDir(deps, config.dataDir, true);
      await releaseLeftoverMoves(db, nodeId, log);
      const { claimed } = await settleLocalDatabases(deps, config.dataDir);
      if (claimed > 0) log.info({ databases: claimed, node: nodeId }, 'recorded the site databases this node holds');
      await local.resumeReplication();
      // Copies of the databases this node holds go to the shared store, for recovery on another node.
      const copier = new DatabaseCopier({
        db,
        nodeId,
        blobs: deps.blobs,
        dataDir: config.dataDir,
        tmpDir: path.join(config.dataDir, 'sites', 'copies.tmp'),
        log,
      });
      if (config.roles.includes('database') && config.databaseCopyMs > 0) copier.start(config.databaseCopyMs);
      stack.defer('the database copier', () => copier.stop());
      if (!client) return null;
      const mover = new DatabaseMover({
        db,
        nodeId,
        local,
        channel: client,
        changes: deps.changes,
        blobs: deps.blobs,
        copier,
        log,
      });
      return channelServer({
        verifier: new RequestVerifier(channelKey(parts.masterKey)),
        provider: local,
        whereIs: (siteId) => placed.whereIsForCaller(siteId),
        moveOut: (siteId, to) => mover.moveOut(siteId, to),
        recoverHere: (siteId, from) => mover.recoverHere(siteId, from),
        maxReceiveBytes: config.siteDatabaseMaxBytes + 1024 * 1024,
        tmpDir: path.join(parts.runtimeDir, 'channel'),
        tls: parts.tls,
        log,
      });
    },
  };
}
