// The nodes of an instance: every server registers itself at start, beats every few seconds while it
// runs, and says when it stops cleanly. A node whose heartbeat lapsed is down. New site databases are
// placed on a live node with the database role, and `berth admin nodes` and /readyz read this table.
// Heartbeats are written from each node's own clock: nodes are expected to keep time (NTP), and the
// lapse is long enough that a second of skew changes nothing.
import type { Knex } from 'knex';
import type { Config, NodeRole } from '../config.ts';
import { BerthError } from '../errors.ts';
import { logJobFailure } from '../db/errors.ts';
import { VERSION } from '../version.ts';
import type { Deps } from './deps.ts';
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

const stateOf = (row: NodeRow, now: number): NodeState =>
  row.stopped_at !== null ? 'stopped' : now - Date.parse(row.heartbeat_at) > LAPSE_MS ? 'down' : 'up';

/** Every node the metadata knows, with its state and how many site databases it holds. */
export async function listNodes(db: Knex, now = Date.now()): Promise<NodeView[]> {
  const rows = (await db('nodes').select('*').orderBy('id')) as NodeRow[];
  const counts = (await db('databases')
    .whereNotNull('node_id')
    .groupBy('node_id')
    .select('node_id')
    .count({ n: '*' })) as Array<{ node_id: string; n: number | string }>;
  const held = new Map(counts.map((row) => [row.node_id, Number(row.n)]));
  return rows.map((row) => ({
    id: row.id,
    address: row.address,
    roles: row.roles.split(',').filter(Boolean) as NodeRole[],
    version: row.version,
    state: stateOf(row, now),
    startedAt: row.started_at,
    heartbeatAt: row.heartbeat_at,
    stoppedAt: row.stopped_at,
    drainingAt: row.draining_at ?? null,
    databases: held.get(row.id) ?? 0,
    replication: parseReplication(row.replication),
  }));
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
  // Another node is a candidate only if this one can reach it: it has an internal channel.
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
  /** Told each time the heartbeat was written (fencing counts from it). */
  onBeat?: () => void;
  /** This node's replication, which each heartbeat carries for `berth admin nodes`. */
  replication?: () => (ReplicationReading & { stalled: string | null }) | null;
}

export class NodeHeartbeat {
  readonly #deps: Pick<Deps, 'db' | 'nodeId' | 'log'>;
  readonly #config: Pick<Config, 'roles' | 'clusterAddress'>;
  #timer: NodeJS.Timeout | undefined;
  #beating: Promise<void> = Promise.resolve();

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

  #onBeat(): void {
    this.#parts.onBeat?.();
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
    const now = new Date().toISOString();
    const row: NodeRow = {
      id: this.#deps.nodeId,
      address: this.#config.clusterAddress,
      roles: this.#config.roles.join(','),
      version: VERSION,
      started_at: now,
      heartbeat_at: now,
      stopped_at: null,
      // A node that starts again after maintenance takes databases again.
      draining_at: null,
      replication: this.#replication(),
    };
    await this.#deps.db('nodes').insert(row).onConflict('id').merge();
    this.#onBeat();
    this.#timer = setInterval(() => {
      this.#beating = this.#beat().catch((err) =>
        logJobFailure(this.#deps.log, err, 'the node heartbeat could not be written'),
      );
    }, HEARTBEAT_MS);
    this.#timer.unref();
  }

  async #beat(): Promise<void> {
    await this.#deps
      .db('nodes')
      .where({ id: this.#deps.nodeId })
      .update({ heartbeat_at: new Date().toISOString(), stopped_at: null, replication: this.#replication() });
    this.#onBeat();
  }

  /** Stops beating and records a clean stop, so other nodes know at once. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#beating;
    await this.#deps
      .db('nodes')
      .where({ id: this.#deps.nodeId })
      .update({ stopped_at: new Date().toISOString() })
      .catch((err: unknown) => logJobFailure(this.#deps.log, err, 'the node could not record its stop'));
  }
}
