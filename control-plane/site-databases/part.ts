// The site databases' part of a start: the provider this node's services use (compose.ts: its own, or
// one that routes each call to the node that holds the database), then, with every part open, this
// node's heartbeat, which carries the databases' fence (cluster/fence.ts) and their replication's
// report, the data dir settled against the metadata, and, when the node takes part in the cluster
// (BERTH_CLUSTER_ADDRESS), the listener other nodes call.
import type http from 'node:http';
import type https from 'node:https';
import { NodeHeartbeat } from '../cluster/nodes.ts';
import { opened, listenAddress, type Part } from '../part.ts';
import { readPeerTls } from './cluster/peer-tls.ts';
import { type ComposedSiteDatabases, composeSiteDatabases } from './compose.ts';

/** The host and port of the cluster address, where the listener binds unless BERTH_CLUSTER_LISTEN says otherwise. */
function addressOfUrl(address: string): { host: string; port: number } {
  const url = new URL(address);
  return { host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port) };
}

export function siteDatabasesPart(): Part {
  let composed: ComposedSiteDatabases | undefined;
  let listener: http.Server | https.Server | null = null;
  return {
    name: 'the site databases',
    open(deps, { config, log, stack, denoPath }) {
      const { metadata, runtimeDir, masterKey, nodeId, metrics } = opened(
        deps,
        'the site databases',
        'metadata',
        'runtimeDir',
        'masterKey',
        'nodeId',
        'metrics',
      );
      const tls = readPeerTls(config.clusterTls);
      const databases = composeSiteDatabases(
        config,
        { metadata, runtimeDir, masterKey, nodeId, metrics, denoPath, tls, log },
        stack,
      );
      composed = databases;
      return {
        siteDatabases: databases.provider,
        localBranches: databases.local,
        replicationStalled: () => databases.replicas?.replicator.stalled() ?? null,
      };
    },
    async start(deps, stack) {
      const databases = composed!;
      const heartbeat = new NodeHeartbeat(deps, deps.config, {
        onBeat: (sentAt, stamped) => databases.heartbeat(sentAt, stamped),
        stamps: () => databases.stampsHeartbeat(),
        replication: () => databases.replicas?.report() ?? null,
      });
      await heartbeat.start();
      stack.defer('the heartbeat', () => heartbeat.stop());
      listener = await databases.start(deps);
    },
    serves(deps) {
      if (!listener) return [];
      const { clusterListen, clusterAddress } = deps.config;
      const at = clusterListen ? listenAddress(clusterListen) : addressOfUrl(clusterAddress);
      return [{ server: listener, ...at, kind: 'calls' }];
    },
  };
}
