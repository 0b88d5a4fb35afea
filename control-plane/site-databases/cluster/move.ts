// Moving a site database from the node that holds it to another database node, as `berth admin
// drain-node` asks before maintenance. The holding node does it: it takes the database's move lease in
// the metadata, pauses the database's writes (reads go on: SiteDatabases.freeze), sends the file over
// a peer call to the new node, which checks it whole and counts every table's rows, compares
// those counts with its own, then switches the placement in one conditional update. Writes that waited
// learn that the database moved and go to the new node; the moved file is then removed. Anything that
// fails before the switch leaves the database where it was, and the new node's copy is discarded.
//
// Recovery is the other way round: when the node that held a database is lost, another node restores
// the latest state of its replica (replication/), checks it the same way, and the placement is switched
// to it, under the same lease, only if the lost node's heartbeat is still stale when the switch is made
// (judged in the switching statement, on the metadata database's clock, with the lost node's row locked
// so that a heartbeat it writes meanwhile lands wholly before or after). While the lease stands, the
// lost node stays fenced even if its heartbeat comes back (recoveryUnderWay, fence.ts).
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Knex } from 'knex';
import type { Logger } from '../../log.ts';
import type { ChangeFeed } from '../../db/changes.ts';
import { type Census, StatementError } from '../provider.ts';
import type { SiteDatabases } from '../local-provider.ts';
import { lockRows } from '../../db/locks.ts';
import { leftByThisNode } from '../../db/node-work.ts';
import { LAPSE_MS, listNodes } from '../../cluster/nodes.ts';
import { databaseNow, timeSql } from '../../db/clock.ts';
import type { PeerClient } from './peer-client.ts';
import type { MoveReport, RecoveryReport } from './peer-protocol.ts';

/** Longest a move may hold its lease: the copy of a database at its size limit, with room to spare. */
const LEASE_MS = 30 * 60_000;
/** Time allowed to send a file: as long as a dump. */
const SEND_MS = 10 * 60_000;

export interface DatabaseMoverOptions {
  db: Knex;
  nodeId: string;
  local: SiteDatabases;
  peers: PeerClient;
  changes: ChangeFeed;
  log: Logger;
}

export class MoveError extends StatementError {}

/** Two counts of the same database agree: both whole, with the same tables holding the same number of rows. */
function compare(source: Census, copy: Census): void {
  if (copy.integrity !== 'ok')
    throw new MoveError('unavailable', `the copy failed SQLite's integrity check: ${copy.integrity}`);
  const names = new Set([...Object.keys(source.tables), ...Object.keys(copy.tables)]);
  for (const name of names) {
    if (source.tables[name] !== copy.tables[name]) {
      throw new MoveError(
        'unavailable',
        `the copy does not match: table ${JSON.stringify(name)} holds ${copy.tables[name] ?? 'nothing'} rows there and ${source.tables[name] ?? 'nothing'} here`,
      );
    }
  }
}

export class DatabaseMover {
  readonly #options: DatabaseMoverOptions;

  constructor(options: DatabaseMoverOptions) {
    this.#options = options;
  }

  /** Moves the site's database, which this node holds, to node `to`. */
  async moveOut(siteId: string, to: string): Promise<MoveReport> {
    const { db, nodeId, local, peers, changes, log } = this.#options;
    if (to === nodeId) throw new MoveError('failed', 'the database is already on that node');
    const target = (await listNodes(db)).find((node) => node.id === to);
    if (!target) throw new MoveError('failed', `there is no node ${to}`);
    if (target.state !== 'up' || !target.roles.includes('database') || target.address === '') {
      throw new MoveError(
        'unavailable',
        `node ${to} cannot take the database: it must be up, have the database role and a cluster address`,
      );
    }
    await this.#lease(siteId, nodeId, to);
    try {
      const started = performance.now();
      const frozen = await local.freeze(siteId);
      let outcome: 'moved' | 'kept' = 'kept';
      try {
        const source = await frozen.census();
        if (source.integrity !== 'ok')
          throw new MoveError(
            'unavailable',
            `the database failed SQLite's integrity check here, and is not moved: ${source.integrity}`,
          );
        const { size: bytes } = await fsp.stat(frozen.file);
        try {
          compare(source, await peers.sendFile(target.address, siteId, frozen.file, SEND_MS));
          outcome = await this.#switch(siteId, to);
        } catch (err) {
          await peers
            .call(target.address, siteId, 'dropCopy', {}, SEND_MS)
            .catch((again: unknown) =>
              log.warn(
                { err: again, siteId, node: to },
                'a copy that did not become the database could not be removed from its node',
              ),
            );
          throw err;
        }
        const rows = Object.values(source.tables).reduce((sum, n) => sum + n, 0);
        return {
          siteId,
          from: nodeId,
          to,
          bytes,
          tables: Object.keys(source.tables).length,
          rows,
          pausedMs: Math.round(performance.now() - started),
        };
      } finally {
        await frozen.thaw(outcome);
        if (outcome === 'moved') await changes.publish({ kind: 'database', siteId });
      }
    } finally {
      await db('database_moves').where({ site_id: siteId, node_id: nodeId }).delete();
    }
  }

  /**
   * Brings the site's database back on this node from the latest state of its replica, when the node
   * `from` that held it is lost: its heartbeat older than `staleMs`, or a clean stop recorded. It is
   * checked whole before the placement is switched, and the switch is made only if that still holds.
   */
  async recoverHere(siteId: string, from: string, staleMs = LAPSE_MS): Promise<RecoveryReport> {
    const { db, nodeId, local, changes } = this.#options;
    const row = (await db('databases').where({ site_id: siteId }).first('node_id')) as
      | { node_id: string | null }
      | undefined;
    if (!row) throw new MoveError('unavailable', 'the site has no database');
    if (row.node_id !== from) throw new MoveError('failed', `the database is not on node ${from}`);
    const holder = (await listNodes(db)).find((node) => node.id === from);
    if (holder?.state === 'up')
      throw new MoveError(
        'failed',
        `node ${from} is up: move its databases with drain-node instead, which loses no write`,
      );
    await this.#lease(siteId, from, nodeId);
    try {
      const recovered = await local.recoverFromReplica(siteId);
      if (!recovered) throw new MoveError('unavailable', 'the database has no replica to recover from');
      const { census, replicatedAt } = recovered;
      const { size: bytes } = await fsp.stat(path.join(local.fileOf(siteId)));
      if (census.integrity !== 'ok') {
        await local.dropCopy(siteId);
        throw new MoveError('unavailable', `the replica failed SQLite's integrity check: ${census.integrity}`);
      }
      const switched = await this.#switchFromLost(siteId, from, staleMs).catch(async (err: unknown) => {
        // Not known to be switched: the metadata says where it is, and this copy is served only if here.
        const placed = (await db('databases')
          .where({ site_id: siteId })
          .first('node_id')
          .catch(() => undefined)) as { node_id: string } | undefined;
        if (placed?.node_id === nodeId) return 'switched' as const;
        if (placed) await local.dropCopy(siteId);
        throw err;
      });
      if (switched !== 'switched') {
        await local.dropCopy(siteId);
        throw new MoveError(
          'failed',
          switched === 'back'
            ? `node ${from} wrote its heartbeat within the last ${staleMs / 1000} s (it may still serve the database): the database stays there`
            : 'the database was deleted or placed elsewhere while it was recovered',
        );
      }
      await changes.publish({ kind: 'database', siteId });
      const rows = Object.values(census.tables).reduce((sum, n) => sum + n, 0);
      return {
        siteId,
        from,
        to: nodeId,
        replicatedAt: replicatedAt.toISOString(),
        bytes,
        tables: Object.keys(census.tables).length,
        rows,
      };
    } finally {
      await db('database_moves').where({ site_id: siteId, node_id: nodeId }).delete();
    }
  }

  /**
   * Places the database on this node if it is still placed on `from` and `from` is still lost, in one
   * statement. The row of `from` is locked first: a heartbeat it is writing commits before (and is
   * seen) or after (and its node then finds the database placed here).
   */
  #switchFromLost(siteId: string, from: string, staleMs: number): Promise<'switched' | 'back' | 'elsewhere'> {
    const { db, nodeId } = this.#options;
    return db.transaction(async (trx) => {
      await lockRows(trx, 'nodes', { id: from });
      const lost = trx('nodes')
        .where({ id: from })
        .where((q) => q.whereNotNull('stopped_at').orWhere('heartbeat_at', '<', timeSql(trx, -staleMs)))
        .select(trx.raw('1'));
      const switched = await trx('databases')
        .where({ site_id: siteId, node_id: from })
        .whereExists(lost)
        .update({ node_id: nodeId });
      if (switched === 1) return 'switched';
      const still = await trx('databases').where({ site_id: siteId, node_id: from }).first('site_id');
      return still ? 'back' : 'elsewhere';
    });
  }

  /**
   * Takes the database's move lease while it is placed on `from`. A live lease held by another move is
   * refused, unless the node holding it is not up: a move cut short by its node's end holds nothing.
   */
  async #lease(siteId: string, from: string, to: string): Promise<void> {
    const { db, nodeId } = this.#options;
    const up = new Set((await listNodes(db)).filter((node) => node.state === 'up').map((node) => node.id));
    const taken = await db.transaction(async (trx) => {
      if (!(await lockRows(trx, 'databases', { site_id: siteId, node_id: from }))) return 'not here';
      const lease = (await trx('database_moves').where({ site_id: siteId }).first()) as
        | { expires_at: string; node_id: string }
        | undefined;
      if (lease && Date.parse(lease.expires_at) > (await databaseNow(trx)) && up.has(lease.node_id)) return 'leased';
      await trx('database_moves').where({ site_id: siteId }).delete();
      await trx('database_moves').insert({
        site_id: siteId,
        from_node: from,
        to_node: to,
        node_id: nodeId,
        acquired_at: timeSql(trx),
        expires_at: timeSql(trx, LEASE_MS),
      });
      return 'taken';
    });
    if (taken === 'not here') throw new StatementError('moved', `the site\u2019s database is not on node ${from}`);
    if (taken === 'leased') throw new MoveError('busy', 'the database is being moved or recovered already');
  }

  /**
   * Places the database on `to`, if it is still placed here. When the answer is lost on its way back
   * (the metadata went away mid-commit), the placement is read again: the database must never be
   * served here after it may have been placed there.
   */
  async #switch(siteId: string, to: string): Promise<'moved' | 'kept'> {
    const { db, nodeId } = this.#options;
    try {
      const switched = await db('databases').where({ site_id: siteId, node_id: nodeId }).update({ node_id: to });
      if (switched !== 1)
        throw new MoveError('failed', 'the database was deleted or placed elsewhere while it was copied');
      return 'moved';
    } catch (err) {
      if (err instanceof MoveError) throw err;
      const row = (await db('databases')
        .where({ site_id: siteId })
        .first('node_id')
        .catch(() => undefined)) as { node_id: string } | undefined;
      if (row && row.node_id !== to) throw err;
      // Placed there, or not known: this node stops serving it either way.
      if (!row)
        this.#options.log.error(
          { err, siteId, to },
          'could not learn whether a moved database was placed on its new node; this node no longer serves it',
        );
      return 'moved';
    }
  }
}

/**
 * Whether another node, up, holds a live move lease of a database placed on this node: it is
 * recovering it, and this node must not serve its databases until that recovery has switched the
 * placement or given up.
 */
export async function recoveryUnderWay(db: Knex, nodeId: string): Promise<boolean> {
  const up = new Set((await listNodes(db)).filter((node) => node.state === 'up').map((node) => node.id));
  const leases = (await db('database_moves')
    .where({ from_node: nodeId })
    .whereNot({ node_id: nodeId })
    .where('expires_at', '>', timeSql(db))
    .select('node_id')) as Array<{ node_id: string }>;
  return leases.some((lease) => up.has(lease.node_id));
}

/** Drops the move leases this node's previous process left when it stopped mid-move. */
export async function releaseLeftoverMoves(db: Knex, nodeId: string, log: Logger): Promise<void> {
  const released = await leftByThisNode(db, 'database_moves', nodeId).delete();
  if (released > 0) log.warn({ released }, 'released the leases of database moves the previous process left');
}
