// What a node's data dir holds, set against what the metadata says it holds, at the node's start. The
// data dir remembers the node it belongs to (`node-id`), so a node whose id changed (its host was
// renamed, or BERTH_NODE_ID set, or a single VM became a cluster's first node) takes its databases'
// placements with it. Then each database folder is
// settled: one the metadata places nowhere yet is this node's (it was made before nodes were recorded);
// one the metadata places on another node is a copy that stopped being the database (moved or
// recovered elsewhere while this node was away, or a move cut short), and one of a database the
// metadata does not know (deleted meanwhile, or the wrong metadata) is no database of this instance:
// neither is ever served, and both are set aside in `superseded/` and logged, never deleted, since they
// may hold writes the operator wants back.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Knex } from 'knex';
import type { Logger } from '../log.ts';
import { writeFileDurably } from '../../storage/durable.ts';
import { listNodes } from '../cluster/nodes.ts';

const SITE_ID = /^[0-9a-f-]{36}$/;

interface Deps {
  db: Knex;
  nodeId: string;
  log: Logger;
}

/**
 * Records this node's id in its data dir. When the data dir belonged to a node of another id, that
 * node's placements become this one's (the data dir is locked by this process: the old id cannot be
 * running on it). A data dir that never recorded an id (one that ran before ids were recorded, or a
 * single-VM instance whose metadata was copied to PostgreSQL) takes the placements of the databases
 * whose folders it holds from whichever node they name that is not up. On metadata of its own
 * (SQLite) there is nothing to move: it only records the id. Returns how many placements moved.
 */
export async function adoptDataDir(deps: Deps, dataDir: string, sharedMetadata: boolean): Promise<number> {
  const file = path.join(dataDir, 'node-id');
  const previous = fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim() : '';
  let adopted = 0;
  if (sharedMetadata && previous !== deps.nodeId) {
    adopted = previous ? await adoptNode(deps, previous) : await adoptFolders(deps, dataDir);
    if (adopted > 0)
      deps.log.warn(
        { previous: previous || undefined, node: deps.nodeId, databases: adopted },
        'the site databases in this data dir were placed on a node of another id: they are now placed on this one',
      );
  }
  if (previous !== deps.nodeId) await writeFileDurably(file, `${deps.nodeId}\n`);
  return adopted;
}

function adoptNode(deps: Deps, previous: string): Promise<number> {
  return deps.db.transaction(async (trx) => {
    const moved = await trx('databases').where({ node_id: previous }).update({ node_id: deps.nodeId });
    await trx('nodes').where({ id: previous }).delete();
    return moved;
  });
}

async function adoptFolders(deps: Deps, dataDir: string): Promise<number> {
  const here = siteFolders(dataDir);
  if (here.length === 0) return 0;
  const up = new Set(
    (await listNodes(deps.db)).filter((node) => node.state === 'up' && node.id !== deps.nodeId).map((node) => node.id),
  );
  let moved = 0;
  for (let i = 0; i < here.length; i += 500) {
    const rows = (await deps
      .db('databases')
      .whereIn('site_id', here.slice(i, i + 500))
      .whereNotNull('node_id')
      .whereNot({ node_id: deps.nodeId })
      .select('site_id', 'node_id')) as Array<{ site_id: string; node_id: string }>;
    const mine = rows.filter((row) => !up.has(row.node_id)).map((row) => row.site_id);
    if (mine.length > 0) moved += await deps.db('databases').whereIn('site_id', mine).update({ node_id: deps.nodeId });
  }
  return moved;
}

const siteFolders = (dataDir: string): string[] => {
  const root = path.join(dataDir, 'sites');
  return fs.existsSync(root) ? fs.readdirSync(root).filter((name) => SITE_ID.test(name)) : [];
};

/** Of `siteIds`, the databases the metadata places on this node (or on none yet: made before nodes were recorded). */
export async function placedHere(db: Knex, nodeId: string, siteIds: string[]): Promise<Set<string>> {
  const here = new Set<string>();
  for (let i = 0; i < siteIds.length; i += 500) {
    const rows = (await db('databases')
      .whereIn('site_id', siteIds.slice(i, i + 500))
      .where((q) => q.where({ node_id: nodeId }).orWhereNull('node_id'))
      .select('site_id')) as Array<{ site_id: string }>;
    for (const row of rows) here.add(row.site_id);
  }
  return here;
}

/** On unshared metadata this server is the only node: every database is in its data dir, whatever id it had. */
export async function claimEveryDatabase(db: Knex, nodeId: string): Promise<void> {
  await db('databases').whereNot({ node_id: nodeId }).orWhereNull('node_id').update({ node_id: nodeId });
}

export interface Settled {
  claimed: number;
  setAside: number;
}

/** Settles every database folder of the data dir against the metadata (see the top of this file). */
export async function settleLocalDatabases(deps: Deps, dataDir: string): Promise<Settled> {
  const root = path.join(dataDir, 'sites');
  const folders = siteFolders(dataDir);
  const settled: Settled = { claimed: 0, setAside: 0 };
  if (folders.length === 0) return settled;
  const rows = new Map<string, string | null>();
  for (let i = 0; i < folders.length; i += 500) {
    const found = (await deps
      .db('databases')
      .whereIn('site_id', folders.slice(i, i + 500))
      .select('site_id', 'node_id')) as Array<{ site_id: string; node_id: string | null }>;
    for (const row of found) rows.set(row.site_id, row.node_id);
  }
  // A copy arriving for a move still in progress is the mover's to keep or discard.
  const arriving = new Set(
    (
      (await deps.db('database_moves').where({ to_node: deps.nodeId }).select('site_id')) as Array<{ site_id: string }>
    ).map((row) => row.site_id),
  );
  const unplaced: string[] = [];
  const setAside = async (siteId: string, fields: object, message: string) => {
    const aside = path.join(dataDir, 'superseded', `${siteId}-${new Date().toISOString().replace(/[:.]/g, '-')}`);
    await fsp.mkdir(path.dirname(aside), { recursive: true, mode: 0o700 });
    await fsp.rename(path.join(root, siteId), aside);
    deps.log.warn({ siteId, ...fields, keptAt: aside }, message);
    settled.setAside++;
  };
  for (const siteId of folders) {
    const node = rows.get(siteId);
    // No database of the site in the metadata: it was deleted while this node was away, or the node
    // was pointed at another instance's metadata. Kept aside either way: a setting is easy to get wrong.
    if (node === undefined)
      await setAside(
        siteId,
        {},
        'this node had a site database the metadata does not know: it is not served, and was set aside',
      );
    else if (node === null) unplaced.push(siteId);
    else if (node !== deps.nodeId && !arriving.has(siteId)) {
      await setAside(
        siteId,
        { heldBy: node },
        'this node had a copy of a site database now placed on another node: it is not served, and was set aside',
      );
    }
  }
  if (unplaced.length > 0)
    settled.claimed = await deps
      .db('databases')
      .whereNull('node_id')
      .whereIn('site_id', unplaced)
      .update({ node_id: deps.nodeId });
  return settled;
}
