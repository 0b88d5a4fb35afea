// The site databases as a start composes them (part.ts opens them). On unshared metadata (SQLite) a
// server is alone: every site database is in its data dir and its own provider serves them. On shared
// metadata (PostgreSQL) each database is placed on a node: calls go where it is (a peer call when that
// is another node), and a node with a cluster listener (BERTH_CLUSTER_ADDRESS) answers other nodes'
// peer calls, moves or recovers databases when asked. Every node replicates the databases it holds
// (replication/).
import type http from 'node:http';
import type https from 'node:https';
import path from 'node:path';
import { type Config, replicaDirOf } from '../config.ts';
import type { Logger } from '../log.ts';
import type { CloseStack } from '../close-stack.ts';
import type { Metadata } from '../db/metadata.ts';
import type { Deps } from '../deps.ts';
import type { Metrics } from '../metrics.ts';
import { SiteDatabases } from './local-provider.ts';
import { socketDirFor } from '../../runtime-host/runtime.ts';
import type { SiteDatabaseProvider } from './provider.ts';
import { adoptDataDir, claimEveryDatabase, placedHere, settleLocalDatabases } from './settle-folders.ts';
import { peerKey, RequestVerifier } from './cluster/peer-auth.ts';
import type { PeerTls } from './cluster/peer-tls.ts';
import { PeerClient } from './cluster/peer-client.ts';
import { peerServer } from './cluster/peer-server.ts';
import { DatabaseMover, recoveryUnderWay, releaseLeftoverMoves } from './cluster/move.ts';
import { PlacedSiteDatabases } from './cluster/placed-provider.ts';
import type { ReplicaTarget, ReplicationTiming } from './replication/litestream.ts';
import { SiteReplicas, recordReplicaBytes } from './replication/site-replicas.ts';
import { Failover } from './cluster/failover.ts';
import { Fence } from './cluster/fence.ts';

declare module '../deps.ts' {
  interface Deps {
    /** The per-site SQL databases. */
    siteDatabases: SiteDatabaseProvider;
    /** The branches of site databases in this node's own data dir (database-branches/branch-sweep.ts). */
    localBranches: Pick<SiteDatabases, 'branchesHere' | 'dropBranch' | 'dropBranchLeftovers' | 'size'>;
    /** Why this node's database replication is stalled, or null when it is not (or replication is off). */
    replicationStalled: () => string | null;
  }
}

export interface SiteDatabaseParts {
  metadata: Metadata;
  denoPath: string;
  /** The runtime's folder: Deno's module cache and the dumps peer calls send live in it. */
  runtimeDir: string;
  masterKey: Buffer;
  nodeId: string;
  /** The TLS files of peer calls, read at the start (cluster/peer-tls.ts). */
  tls: PeerTls | null;
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
  /** Their replicas; null with BERTH_DATABASE_REPLICATION=false. */
  replicas: SiteReplicas | null;
  /** Set on shared metadata: where each database is placed, cached and forgotten on the change feed. */
  placed: PlacedSiteDatabases | null;
  /**
   * Settles this node's data dir against the metadata and, on shared metadata, starts the node's part
   * in the cluster. Returns the cluster listener, not yet listening, when this node takes part in it.
   */
  start(deps: Deps): Promise<http.Server | https.Server | null>;
  /** A beat this node sent at `sentAt` (`performance.now()`) was written (fencing counts from the sending). */
  heartbeat(sentAt: number, stamped: boolean): void;
  /** Whether this node's next beat stamps its heartbeat (not while fenced: see cluster/fence.ts). */
  stampsHeartbeat(): boolean;
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
        maxBytes: config.databaseReplicaMaxBytes,
        onBytes: (siteId, bytes) => recordReplicaBytes(metadata, siteId, bytes),
        log: parts.log,
        ...(metadata.shared ? { holds: (siteIds: string[]) => placedHere(metadata.db, parts.nodeId, siteIds) } : {}),
      })
    : null;
  // Closed after the provider: the engine ships what the last statements wrote as it stops.
  if (replicas) {
    stack.defer('the database replicas', () => replicas.close());
    metrics.read({ replication: () => replicas.reading() });
  }
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
    lineDir: socketDirFor(parts.runtimeDir),
  });
  if (!metadata.shared) {
    stack.defer('the site databases', () => local.close());
    return {
      provider: local,
      local,
      replicas,
      placed: null,
      start: async (deps) => {
        await adoptDataDir(deps, config.dataDir, false);
        await claimEveryDatabase(deps.db, deps.nodeId);
        await local.resumeReplication();
        return null;
      },
      heartbeat: () => undefined,
      stampsHeartbeat: () => true,
    };
  }
  const client = config.clusterAddress ? new PeerClient(peerKey(parts.masterKey), parts.nodeId, parts.tls) : null;
  if (client) metrics.read({ peerCalls: () => client.calls });
  const placed = new PlacedSiteDatabases({
    db: metadata.db,
    nodeId: parts.nodeId,
    local,
    peers: client,
    statementTimeoutMs: config.databaseTimeoutMs,
  });
  stack.defer('the site databases', () => placed.close());
  const failsOver = config.databaseFailoverMs > 0 && replicas !== null && config.roles.includes('database');
  let fence: Fence | null = null;
  return {
    provider: placed,
    local,
    replicas,
    placed,
    heartbeat: (sentAt, stamped) => fence?.renewed(sentAt, stamped),
    stampsHeartbeat: () => fence?.stamps ?? true,
    start: async (deps) => {
      const { db, nodeId, log } = deps;
      deps.changes.subscribe(placed);
      await adoptDataDir(deps, config.dataDir, true);
      await releaseLeftoverMoves(db, nodeId, log);
      const { claimed } = await settleLocalDatabases(deps, config.dataDir);
      if (claimed > 0) log.info({ databases: claimed, node: nodeId }, 'recorded the site databases this node holds');
      await local.resumeReplication();
      if (failsOver) {
        fence = new Fence({
          fenceMs: config.databaseFailoverMs / 2,
          fenced: async () => {
            log.error(
              { node: nodeId, sinceMs: config.databaseFailoverMs / 2 },
              'this node could not write its heartbeat: it stops serving its site databases until it can, as another node may take them over',
            );
            await local.fence();
          },
          restored: async () => {
            // A recovery of one of its databases under way elsewhere decides first (its switch finds
            // this node's heartbeat fresh and gives up, or it has moved the database away).
            if (await recoveryUnderWay(db, nodeId)) throw new Error('a database of this node is being recovered');
            // What another node took over meanwhile is set aside, never served.
            const { setAside } = await settleLocalDatabases(deps, config.dataDir);
            local.unfence();
            log.warn({ node: nodeId, setAside }, 'this node writes its heartbeat again and serves its site databases');
          },
        });
        const closing = fence;
        stack.defer('the fence', () => closing.close());
      }
      if (!client) return null;
      const mover = new DatabaseMover({
        db,
        nodeId,
        local,
        peers: client,
        changes: deps.changes,
        log,
      });
      if (failsOver) {
        const failover = new Failover({ db, nodeId, mover, log, failoverMs: config.databaseFailoverMs });
        failover.start();
        stack.defer('the failover', () => failover.stop());
        metrics.read({ databasesTakenOver: () => failover.recovered });
      }
      return peerServer({
        verifier: new RequestVerifier(peerKey(parts.masterKey)),
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
