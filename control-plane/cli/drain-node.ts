// `berth admin drain-node <id>`: moves every site database of a node to the other database nodes, one
// at a time, before the node is stopped for maintenance. The node is first marked as draining, so no
// new database is placed on it; each database is then moved by the node itself (it pauses the
// database's writes, sends the file, has it checked, switches the placement: cluster/database-move.ts),
// asked over the internal channel with the key every node derives from the master key. The node takes
// databases again when it next starts.
import os from 'node:os';
import type { Config } from '../config.ts';
import { masterKeyFileOf } from '../config.ts';
import { BerthError } from '../errors.ts';
import { readChannelTls } from '../cluster/channel-tls.ts';
import { channelKey } from '../cluster/channel-auth.ts';
import { ChannelClient, type MoveReport } from '../cluster/database-channel.ts';
import { StatementError } from '../../storage/site-database.ts';
import { loadMasterKey } from '../../storage/master-key.ts';
import { formatBytes } from '../format-bytes.ts';
import type { Store } from '../services/deps.ts';
import { listNodes, takesDatabases } from '../services/nodes.ts';
import { UsageError } from './usage-error.ts';

/** A move sends a file of up to the database size limit and checks it on both sides. */
const MOVE_TIMEOUT_MS = 30 * 60_000;

const line = (m: MoveReport) => `moved ${m.siteId} to ${m.to}: ${formatBytes(m.bytes)}, ${m.rows} rows in ${m.tables} tables checked; writes waited ${m.pausedMs} ms`;

export async function drainNode(store: Store, args: string[], config: Config): Promise<{ json: unknown; text: string }> {
  const positional = args.filter((arg) => !arg.startsWith('--'));
  const unknown = args.filter((arg) => arg.startsWith('--') && arg !== '--json');
  if (unknown.length > 0) throw new UsageError(`unknown option ${unknown[0]}`);
  if (positional.length !== 1) throw new UsageError('usage: berth admin drain-node <node id>   (berth admin nodes lists them)');
  const id = positional[0]!;
  if (!config.databaseUrl) throw new BerthError('invalid_request', 'on SQLite metadata there is one node, which holds every site database: there is nowhere to move them');
  const json = args.includes('--json');
  const { db } = store;
  const node = (await listNodes(db)).find((n) => n.id === id);
  if (!node) throw new BerthError('not_found', `there is no node ${id}; berth admin nodes lists them`);
  if (node.state !== 'up') throw new BerthError('database_unavailable', `node ${id} is ${node.state}: its databases can only be copied by the node itself, so start it first`);
  if (node.address === '') throw new BerthError('invalid_request', `node ${id} has no cluster address: no other node can take its databases`);
  await db('nodes').where({ id }).update({ draining_at: new Date().toISOString() });

  const client = new ChannelClient(channelKey(loadMasterKey(masterKeyFileOf(config))), `admin@${os.hostname()}`, readChannelTls(config.clusterTls));
  const moves: MoveReport[] = [];
  const failures: Array<{ siteId: string; message: string }> = [];
  try {
    const held = (await db('databases').where({ node_id: id }).orderBy('site_id').select('site_id')) as Array<{ site_id: string }>;
    for (const { site_id: siteId } of held) {
      const targets = (await listNodes(db)).filter((n) => n.id !== id && takesDatabases(n) && n.address !== '');
      targets.sort((a, b) => a.databases - b.databases || a.id.localeCompare(b.id));
      const target = targets[0];
      if (!target) throw new BerthError('database_unavailable', `no other database node is up to take the databases of ${id}; ${moves.length} moved so far`);
      try {
        const report = (await client.call(node.address, siteId, 'move', { to: target.id }, MOVE_TIMEOUT_MS)) as MoveReport;
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
  const left = Number(((await db('databases').where({ node_id: id }).count({ n: '*' })) as Array<{ n: number | string }>)[0]!.n);
  if (failures.length > 0 || left > 0) {
    throw new BerthError('database_unavailable', `${failures.length} of the databases of ${id} could not be moved and ${left} are still on it; they are served from it as before. Run drain-node again once the cause is fixed`);
  }
  return {
    json: { node: id, moves },
    text: `${id} holds no site databases now (${moves.length} moved); it takes no new ones until it starts again, and can be stopped`,
  };
}
