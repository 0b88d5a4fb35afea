// Operator commands that move site databases between nodes, asking nodes with peer calls
// with the key every node derives from the master key (site-databases/cluster/move.ts does the work).
//
// `berth admin drain-node <id>` moves every site database of a node to the other database nodes, one
// at a time, before the node is stopped for maintenance. The node is first marked as draining, so no
// new database is placed on it; each database is then moved by the node itself (it pauses the
// database's writes, sends the file, has it checked, switches the placement). The node takes databases
// again when it next starts.
//
// `berth admin recover-database --site <id>` brings back a database whose node is lost for good, on
// another database node, from the latest state of its replica, and says when the replica last received writes.
import os from 'node:os';
import type { Config } from '../config.ts';
import { masterKeyFileOf } from '../config.ts';
import { BerthError } from '../errors.ts';
import { readPeerTls } from '../site-databases/cluster/peer-tls.ts';
import { peerKey } from '../site-databases/cluster/peer-auth.ts';
import { PeerClient } from '../site-databases/cluster/peer-client.ts';
import type { MoveReport, RecoveryReport } from '../site-databases/cluster/peer-protocol.ts';
import { StatementError } from '../site-databases/provider.ts';
import { loadMasterKey } from '../../storage/master-key.ts';
import { formatBytes } from '../format-bytes.ts';
import type { Store } from '../deps.ts';
import { LAPSE_MS, type NodeView, listNodes, takesDatabases } from '../cluster/nodes.ts';
import { UsageError } from './usage-error.ts';
import { options, uuid } from './admin-options.ts';

/** A move sends a file of up to the database size limit and checks it on both sides. */
const MOVE_TIMEOUT_MS = 30 * 60_000;

const line = (m: MoveReport) =>
  `moved ${m.siteId} to ${m.to}: ${formatBytes(m.bytes)}, ${m.rows} rows in ${m.tables} tables checked; writes waited ${m.pausedMs} ms`;

/** A client of the nodes' cluster listeners, signing as the operator on this host. */
const peerClient = (config: Config) =>
  new PeerClient(
    peerKey(loadMasterKey(masterKeyFileOf(config))),
    `admin@${os.hostname()}`,
    readPeerTls(config.clusterTls),
  );

/** Of `nodes`, the one that can take a database and holds the fewest. */
function leastHeld(nodes: NodeView[]): NodeView | undefined {
  return nodes
    .filter((n) => takesDatabases(n) && n.address !== '')
    .sort((a, b) => a.databases - b.databases || a.id.localeCompare(b.id))[0];
}

/** How long ago `time` was, in words: "3 minutes". */
function age(time: string, now = Date.now()): string {
  const seconds = Math.max(0, Math.round((now - Date.parse(time)) / 1000));
  if (seconds < 120) return `${seconds} seconds`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} minutes`;
  if (seconds < 172_800) return `${Math.round(seconds / 3600)} hours`;
  return `${Math.round(seconds / 86_400)} days`;
}

export async function drainNode(
  store: Store,
  args: string[],
  config: Config,
): Promise<{ json: unknown; text: string }> {
  const positional = args.filter((arg) => !arg.startsWith('--'));
  const unknown = args.filter((arg) => arg.startsWith('--') && arg !== '--json');
  if (unknown.length > 0) throw new UsageError(`unknown option ${unknown[0]}`);
  if (positional.length !== 1)
    throw new UsageError('usage: berth admin drain-node <node id>   (berth admin nodes lists them)');
  const id = positional[0]!;
  if (!config.databaseUrl)
    throw new BerthError(
      'invalid_request',
      'on SQLite metadata there is one node, which holds every site database: there is nowhere to move them',
    );
  const json = args.includes('--json');
  const { db } = store;
  const node = (await listNodes(db)).find((n) => n.id === id);
  if (!node) throw new BerthError('not_found', `there is no node ${id}; berth admin nodes lists them`);
  if (node.state !== 'up')
    throw new BerthError(
      'database_unavailable',
      `node ${id} is ${node.state}: its databases can only be copied by the node itself, so start it first`,
    );
  if (node.address === '')
    throw new BerthError('invalid_request', `node ${id} has no cluster address: no other node can take its databases`);
  await db('nodes').where({ id }).update({ draining_at: new Date().toISOString() });

  const client = peerClient(config);
  const moves: MoveReport[] = [];
  const failures: Array<{ siteId: string; message: string }> = [];
  try {
    const held = (await db('databases').where({ node_id: id }).orderBy('site_id').select('site_id')) as Array<{
      site_id: string;
    }>;
    for (const { site_id: siteId } of held) {
      const target = leastHeld((await listNodes(db)).filter((n) => n.id !== id));
      if (!target)
        throw new BerthError(
          'database_unavailable',
          `no other database node is up to take the databases of ${id}; ${moves.length} moved so far`,
        );
      try {
        const report = await client.call(node.address, siteId, 'move', { to: target.id }, MOVE_TIMEOUT_MS);
        moves.push(report);
        if (!json) process.stdout.write(`${line(report)}\n`);
      } catch (err) {
        if (!(err instanceof StatementError)) throw err;
        failures.push({ siteId, message: err.message });
        process.stderr.write(`berth: ${siteId} was not moved: ${err.message}\n`);
      }
    }
  } finally {
    client.close();
  }
  const left = Number(
    ((await db('databases').where({ node_id: id }).count({ n: '*' })) as Array<{ n: number | string }>)[0]!.n,
  );
  if (failures.length > 0 || left > 0) {
    throw new BerthError(
      'database_unavailable',
      `${failures.length} of the databases of ${id} could not be moved and ${left} are still on it; they are served from it as before. Run drain-node again once the cause is fixed`,
    );
  }
  return {
    json: { node: id, moves },
    text: `${id} holds no site databases now (${moves.length} moved); it takes no new ones until it starts again, and can be stopped`,
  };
}

export async function recoverDatabase(
  store: Store,
  args: string[],
  config: Config,
): Promise<{ json: unknown; text: string }> {
  const values = options(args, { site: { type: 'string' }, to: { type: 'string' } });
  const siteId = uuid(values.site, '--site');
  if (!config.databaseUrl)
    throw new BerthError(
      'invalid_request',
      'on SQLite metadata there is one node, and its data dir is the database: restore it from a backup (berth admin restore)',
    );
  const { db } = store;
  const row = (await db('databases').where({ site_id: siteId }).first('node_id')) as
    | { node_id: string | null }
    | undefined;
  if (!row) throw new BerthError('not_found', `site ${siteId} has no database`);
  const nodes = await listNodes(db);
  const holder = nodes.find((n) => n.id === row.node_id);
  if (holder?.state === 'up') {
    throw new BerthError(
      'invalid_request',
      `the database is on node ${holder.id}, which is up (it beat at ${holder.heartbeatAt}; a node is down ${LAPSE_MS / 1000} s after its last beat): it needs no recovery, and drain-node moves it without losing a write`,
    );
  }
  if (row.node_id === null)
    throw new BerthError(
      'invalid_request',
      'the database is not placed on any node yet: start the node whose data dir holds it',
    );
  const to = typeof values.to === 'string' ? values.to : undefined;
  const target = to ? nodes.find((n) => n.id === to) : leastHeld(nodes);
  if (!target)
    throw new BerthError(
      to ? 'not_found' : 'database_unavailable',
      to ? `there is no node ${to}` : 'no database node is up to take the database',
    );
  if (!takesDatabases(target) || target.address === '')
    throw new BerthError(
      'invalid_request',
      `node ${target.id} cannot take the database: it must be up, have the database role and a cluster address, and not be draining`,
    );
  const client = peerClient(config);
  let report: RecoveryReport;
  try {
    report = await client.call(target.address, siteId, 'recover', { from: row.node_id }, MOVE_TIMEOUT_MS);
  } catch (err) {
    if (err instanceof StatementError)
      throw new BerthError('database_unavailable', `the database was not recovered: ${err.message}`);
    throw err;
  } finally {
    client.close();
  }
  return {
    json: { recovery: report },
    text: `recovered the database of site ${siteId} on ${report.to} from its replica, which last received writes at ${report.replicatedAt} (${age(report.replicatedAt)} ago): ${formatBytes(report.bytes)}, ${report.rows} rows in ${report.tables} tables, checked. If ${report.from} comes back, its file is set aside in its data dir's superseded/ folder, never served`,
  };
}
