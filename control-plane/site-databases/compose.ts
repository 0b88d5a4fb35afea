// The cluster's part of a start. On unshared metadata (SQLite) a server is alone: every site database is
// in its data dir and its own provider serves them. On shared metadata (PostgreSQL) each database is
// placed on a node: calls go where it is (over the internal channel when that is another node), and a
// node that takes part in the channel (BERTH_CLUSTER_ADDRESS) answers other nodes' calls, keeps copies
// of the databases it holds in the blob store, and moves or recovers databases when asked.
import type http from 'node:http';
import type https from 'node:https';
import path from 'node:path';
import type { Config } from '../config.ts';
import type { CloseStack } from '../close-stack.ts';
import type { Metadata } from '../db/metadata.ts';
import type { Deps } from '../services/deps.ts';
import type { Metrics } from '../metrics.ts';
import type { SiteDatabaseProvider } from './provider.ts';
import type { SiteDatabases } from './local-provider.ts';
import { channelKey, RequestVerifier } from './cluster/channel-auth.ts';
import type { ChannelTls } from './cluster/channel.ts';
import { ChannelClient, channelServer } from './cluster/channel.ts';
import { DatabaseCopier } from './cluster/copies.ts';
import { DatabaseMover, releaseLeftoverMoves } from './cluster/move.ts';
import { adoptDataDir, claimEveryDatabase, settleLocalDatabases } from './data-dir.ts';
import { PlacedSiteDatabases } from './cluster/placed-provider.ts';

export interface SiteDatabaseRouting {
  /** The provider services use. */
  provider: SiteDatabaseProvider;
  /** Set on shared metadata: where each database is placed, cached and forgotten on the change feed. */
  placed: PlacedSiteDatabases | null;
  /** Set when this node takes part in the internal channel. */
  client: ChannelClient | null;
}

/** The site database provider for this node: its own, or one that routes each call to where the database is. */
export function routeSiteDatabases(
  config: Config,
  metadata: Metadata,
  parts: { local: SiteDatabases; masterKey: Buffer; nodeId: string; tls: ChannelTls | null; metrics: Metrics },
  stack: CloseStack,
): SiteDatabaseRouting {
  const { local } = parts;
  if (!metadata.shared) {
    stack.defer('the site databases', () => local.close());
    return { provider: local, placed: null, client: null };
  }
  const client = config.clusterAddress ? new ChannelClient(channelKey(parts.masterKey), parts.nodeId, parts.tls) : null;
  if (client) parts.metrics.read({ channelCalls: () => client.calls });
  const placed = new PlacedSiteDatabases({
    db: metadata.db,
    nodeId: parts.nodeId,
    local,
    channel: client,
    statementTimeoutMs: config.databaseTimeoutMs,
  });
  stack.defer('the site databases', () => placed.close());
  return { provider: placed, placed, client };
}

/**
 * Settles this node's data dir against the metadata and, on shared metadata, starts the node's part in
 * the cluster. Returns the channel's listener, not yet listening, when this node takes part in it.
 */
export async function joinCluster(
  deps: Deps,
  metadata: Metadata,
  routing: SiteDatabaseRouting,
  parts: { local: SiteDatabases; runtimeDir: string; tls: ChannelTls | null },
  stack: CloseStack,
): Promise<http.Server | https.Server | null> {
  const { config, db, nodeId, log } = deps;
  await adoptDataDir(deps, config.dataDir, metadata.shared);
  if (!metadata.shared) {
    await claimEveryDatabase(db, nodeId);
    return null;
  }
  await releaseLeftoverMoves(db, nodeId, log);
  const { claimed } = await settleLocalDatabases(deps, config.dataDir);
  if (claimed > 0) log.info({ databases: claimed, node: nodeId }, 'recorded the site databases this node holds');
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
  const { placed, client } = routing;
  if (!placed || !client) return null;
  const mover = new DatabaseMover({
    db,
    nodeId,
    local: parts.local,
    channel: client,
    changes: deps.changes,
    blobs: deps.blobs,
    copier,
    log,
  });
  return channelServer({
    verifier: new RequestVerifier(channelKey(deps.masterKey)),
    provider: parts.local,
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
    tmpDir: path.join(parts.runtimeDir, 'channel'),
    tls: parts.tls,
    log,
  });
}
