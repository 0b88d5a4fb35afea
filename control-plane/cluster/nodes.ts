// The nodes of an instance: every server registers itself at start, beats every few seconds while it
// runs, and says when it stops cleanly. A node whose heartbeat lapsed is down. New site databases are
// placed on a live node with the database role, and `berth admin nodes` and /readyz read this table.
// A heartbeat carries the metadata database's time, written by the statement itself, and a node is
// judged down against that same clock (db/clock.ts): no node's clock is compared with another's.
import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import type { Knex } from 'knex';
import type { Config, NodeRole } from '../config.ts';
import { BerthError } from '../errors.ts';
import { logJobFailure } from '../db/errors.ts';
import { VERSION } from '../version.ts';
import { databaseNow, timeSql } from '../db/clock.ts';
import type { Deps } from '../deps.ts';
import type { ReplicationReading } from '../metrics.ts';

export const HEARTBEAT_MS = 5_000;
/** A node that has not beaten for this long is down. */
export const LAPSE_MS = 3 * HEARTBEAT_MS;

interface NodeRow {
  replication?: string | null;
  id: string;
  address: string;
  roles: string;
  version: string;
  started_at: string;
  heartbeat_at: string;
  stopped_at: string | null;
  draining_at?: string | null;
}

export type NodeState = 'up' | 'down' | 'stopped';

export interface NodeView {
  id: string;
  address: string;
  roles: NodeRole[];
  version: string;
  state: NodeState;
  startedAt: string;
  heartbeatAt: string;
  /** How long ago its heartbeat was written, on the metadata database's clock. */
  silentMs: number;
  stoppedAt: string | null;
  /** Since when `berth admin drain-node` has been moving its databases away; null when it takes new ones. */
  drainingAt: string | null;
  /** Site databases placed on the node. */
  databases: number;
  /** What its last heartbeat said of the replication of the databases it has in use; null: nothing (replication off). */
  replication: NodeReplication | null;
}

/** A node's replication, as its heartbeat writes it: the databases in use, the most behind first. */
export interface NodeReplication {
  /** Why it is stalled, or null. */
  stalled: string | null;
  /** Databases in use, being replicated; `databases` lists the REPLICATION_LISTED most behind. */
  inUse: number;
  databases: Array<{ siteId: string; lagMs: number; replicatedAt: string | null; replicaBytes: number | null }>;
}

/** At most this many databases of a node are listed in its heartbeat, the most behind first. */
const REPLICATION_LISTED = 100;

const parseReplication = (text: string | null | undefined): NodeReplication | null => {
  if (!text) return null;
  try {
    return JSON.parse(text) as NodeReplication;
  } catch {
    return null;
  }
};

const stateOf = (row: NodeRow, silentMs: number): NodeState =>
  row.stopped_at !== null ? 'stopped' : silentMs > LAPSE_MS ? 'down' : 'up';

/** Every node the metadata knows, with its state (on the database's clock) and how many site databases it holds. */
export async function listNodes(db: Knex): Promise<NodeView[]> {
  const now = await databaseNow(db);
  const rows = (await db('nodes').select('*').orderBy('id')) as NodeRow[];
  const counts = (await db('databases')
    .whereNotNull('node_id')
    .groupBy('node_id')
    .select('node_id')
    .count({ n: '*' })) as Array<{ node_id: string; n: number | string }>;
  const held = new Map(counts.map((row) => [row.node_id, Number(row.n)]));
  return rows.map((row) => {
    const silentMs = now - Date.parse(row.heartbeat_at);
    return {
      id: row.id,
      address: row.address,
      roles: row.roles.split(',').filter(Boolean) as NodeRole[],
      version: row.version,
      state: stateOf(row, silentMs),
      startedAt: row.started_at,
      heartbeatAt: row.heartbeat_at,
      silentMs,
      stoppedAt: row.stopped_at,
      drainingAt: row.draining_at ?? null,
      databases: held.get(row.id) ?? 0,
      replication: parseReplication(row.replication),
    };
  });
}

/** A node new or moved site databases may go to: up, with the database role, not being drained. */
export const takesDatabases = (node: NodeView): boolean =>
  node.state === 'up' && node.roles.includes('database') && node.drainingAt === null;

/**
 * The node a new site database goes to: the live database node holding the fewest, this one first
 * among equals (its database answers without a hop). None alive is an outage, not a bad request.
 * Nodes place concurrently without a lock: two may pick the same node, which only evens out later.
 */
export async function placeDatabase(deps: Pick<Deps, 'db' | 'nodeId'>): Promise<string> {
  // Another node is a candidate only if this one can reach it: it has a cluster address.
  const candidates = (await listNodes(deps.db)).filter(
    (node) => takesDatabases(node) && (node.id === deps.nodeId || node.address !== ''),
  );
  candidates.sort(
    (a, b) =>
      a.databases - b.databases ||
      Number(b.id === deps.nodeId) - Number(a.id === deps.nodeId) ||
      a.id.localeCompare(b.id),
  );
  const chosen = candidates[0];
  if (!chosen)
    throw new BerthError(
      'database_unavailable',
      'no node that holds site databases is running; start one and try again',
    );
  return chosen.id;
}

/**
 * A restored instance is a new one: its site databases are in the data dir it was restored into, and
 * the nodes that ran the backed-up instance are not its nodes. Its first start records them again.
 */
export async function forgetPlacements(db: Knex): Promise<void> {
  await db.transaction(async (trx) => {
    await trx('databases').update({ node_id: null });
    await trx('database_moves').delete();
    await trx('nodes').delete();
  });
}

/** This node's row, kept fresh while it runs. */
export interface HeartbeatParts {
  /**
   * Told each time a beat was written, with when it was sent (`performance.now()` before the statement
   * left) and whether it stamped the heartbeat: fencing counts from the sending, since the database
   * stamped it later.
   */
  onBeat?: (sentAt: number, stamped: boolean) => void;
  /**
   * Whether the next beat stamps the heartbeat (default: always). A fenced node's beats only probe its
   * link, so that its heartbeat ages and its databases can be taken over however slow the link is.
   */
  stamps?: () => boolean;
  /** This node's replication, which each heartbeat carries for `berth admin nodes`. */
  replication?: () => (ReplicationReading & { stalled: string | null }) | null;
}

export class NodeHeartbeat {
  readonly #deps: Pick<Deps, 'db' | 'nodeId' | 'log'>;
  readonly #config: Pick<Config, 'roles' | 'clusterAddress'>;
  #timer: NodeJS.Timeout | undefined;
  #beating: Promise<void> = Promise.resolve();
  #stopped = false;

  readonly #parts: HeartbeatParts;

  constructor(
    deps: Pick<Deps, 'db' | 'nodeId' | 'log'>,
    config: Pick<Config, 'roles' | 'clusterAddress'>,
    parts: HeartbeatParts = {},
  ) {
    this.#deps = deps;
    this.#config = config;
    this.#parts = parts;
  }

  #onBeat(sentAt: number, stamped: boolean): void {
    this.#parts.onBeat?.(sentAt, stamped);
  }

  #stamps(): boolean {
    return this.#parts.stamps?.() ?? true;
  }

  /** The replication summary the heartbeat carries. */
  #replication(): string | null {
    const reading = this.#parts.replication?.();
    if (!reading) return null;
    const databases = [...reading.databases]
      .sort((a, b) => b.lagMs - a.lagMs)
      .slice(0, REPLICATION_LISTED)
      .map((db) => ({
        siteId: db.siteId,
        lagMs: db.lagMs,
        replicatedAt: db.replicatedAt?.toISOString() ?? null,
        replicaBytes: db.replicaBytes,
      }));
    const summary: NodeReplication = { stalled: reading.stalled, inUse: reading.databases.length, databases };
    return JSON.stringify(summary);
  }

  /** Registers the node (a restart replaces its row) and beats until stop(). */
  async start(): Promise<void> {
    const { db } = this.#deps;
    const sentAt = performance.now();
    await db('nodes')
      .insert({
        id: this.#deps.nodeId,
        address: this.#config.clusterAddress,
        roles: this.#config.roles.join(','),
        version: VERSION,
        started_at: timeSql(db),
        heartbeat_at: timeSql(db),
        stopped_at: null,
        // A node that starts again after maintenance takes databases again.
        draining_at: null,
        replication: this.#replication(),
      })
      .onConflict('id')
      .merge();
    this.#onBeat(sentAt, true);
    this.#next(HEARTBEAT_MS);
  }

  /**
   * One beat at a time, HEARTBEAT_MS after the previous one ended (at once after a probe that found the
   * link fast again): on a slow link beats do not pile up on the pool's connections, and their stamps
   * follow the order they were sent in.
   */
  #next(delayMs: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#beating = this.#beat()
        .catch((err) => {
          logJobFailure(this.#deps.log, err, 'the node heartbeat could not be written');
          return true;
        })
        .then((stamped) => this.#next(!stamped && this.#stamps() ? 0 : HEARTBEAT_MS));
    }, delayMs);
    this.#timer.unref();
  }

  /** One beat; returns whether it stamped the heartbeat. */
  async #beat(): Promise<boolean> {
    const { db } = this.#deps;
    const stamped = this.#stamps();
    const sentAt = performance.now();
    await db('nodes')
      .where({ id: this.#deps.nodeId })
      .update(
        stamped
          ? { heartbeat_at: timeSql(db), stopped_at: null, replication: this.#replication() }
          : { replication: this.#replication() },
      );
    this.#onBeat(sentAt, stamped);
    return stamped;
  }

  /** Stops beating and records a clean stop, so other nodes know at once. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#beating;
    clearTimeout(this.#timer);
    const { db } = this.#deps;
    await db('nodes')
      .where({ id: this.#deps.nodeId })
      .update({ stopped_at: timeSql(db) })
      .catch((err: unknown) => logJobFailure(this.#deps.log, err, 'the node could not record its stop'));
  }
}

/**
 * This node's id when BERTH_NODE_ID is unset: its host and a digest of its data dir, stable across
 * restarts (whatever port it listens on) and distinct for two servers on one host; the path itself
 * stays out of the metadata.
 */
export function defaultNodeId(dataDir: string): string {
  return `${os.hostname()}:${crypto.createHash('sha256').update(path.resolve(dataDir)).digest('hex').slice(0, 12)}`;
}
