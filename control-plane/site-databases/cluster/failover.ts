// Automatic failover: the databases of a database node whose heartbeat lapsed past
// BERTH_DATABASE_FAILOVER_MS come back on the live database nodes from their replicas, with no
// operator. Every database node looks every few seconds; each database of a lost node has one node
// chosen for it among those that take databases (by its id, so the work spreads and nodes agree
// without talking), which recovers it under the database's move lease (move.ts) — the lease and the
// conditional switch of the placement make it happen once even if two nodes disagree for a moment, and
// the switch happens only if the lost node's heartbeat is still older than the failover time when it
// is made: a node whose heartbeat came back meanwhile keeps its databases, and the recovery gives up.
// Meanwhile calls answer 503 database_unavailable. The lost node stopped serving them itself before
// (fence.ts), so the two never both take writes. A node that stopped cleanly (`stopped_at`) is being
// maintained, not lost: its databases wait for it (or for `berth admin recover-database`).
import crypto from 'node:crypto';
import type { Knex } from 'knex';
import type { Logger } from '../../log.ts';
import { logJobFailure } from '../../db/errors.ts';
import { listNodes, takesDatabases } from '../../cluster/nodes.ts';
import type { DatabaseMover } from './move.ts';

export interface FailoverOptions {
  db: Knex;
  nodeId: string;
  mover: Pick<DatabaseMover, 'recoverHere'>;
  log: Logger;
  /** A node whose heartbeat is older than this has its databases taken over. */
  failoverMs: number;
  /** How often lost nodes are looked for. */
  checkMs?: number;
}

/** Databases recovered at most per round by one node, so one round stays short. */
const PER_ROUND = 20;

/** The node, of `candidates`, that recovers `siteId`: the same answer on every node that sees the same nodes. */
export function recovererOf(siteId: string, candidates: string[]): string | undefined {
  const sorted = [...candidates].sort();
  if (sorted.length === 0) return undefined;
  const n = crypto.createHash('sha256').update(siteId).digest().readUInt32BE(0);
  return sorted[n % sorted.length];
}

export class Failover {
  readonly #options: FailoverOptions;
  #timer: NodeJS.Timeout | undefined;
  #round: Promise<void> = Promise.resolve();
  #stopped = false;
  /** Databases taken over by this node since it started, for /metrics. */
  recovered = 0;

  constructor(options: FailoverOptions) {
    this.#options = options;
  }

  start(): void {
    const every = this.#options.checkMs ?? Math.min(5000, Math.max(500, this.#options.failoverMs / 6));
    this.#timer = setInterval(() => {
      this.#round = this.#round
        .then(async () => void (await this.round()))
        .catch((err) => logJobFailure(this.#options.log, err, 'looking for lost database nodes failed'));
    }, every);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#round;
  }

  /** One look: recovers here the databases of lost nodes that fall to this node; returns how many. */
  async round(): Promise<number> {
    const { db, nodeId, failoverMs, log } = this.#options;
    // Judged on the metadata database's clock, as the heartbeats are stamped.
    const nodes = await listNodes(db);
    const candidates = nodes.filter((node) => takesDatabases(node) && node.address !== '').map((node) => node.id);
    if (!candidates.includes(nodeId)) return 0;
    const lost = nodes.filter(
      (node) => node.id !== nodeId && node.stoppedAt === null && node.databases > 0 && node.silentMs > failoverMs,
    );
    let recovered = 0;
    for (const node of lost) {
      const rows = (await db('databases')
        .where({ node_id: node.id, status: 'READY' })
        .orderBy('site_id')
        .select('site_id')) as Array<{ site_id: string }>;
      for (const { site_id: siteId } of rows) {
        if (this.#stopped || recovered >= PER_ROUND) return recovered;
        if (recovererOf(siteId, candidates) !== nodeId) continue;
        const started = performance.now();
        try {
          const report = await this.#options.mover.recoverHere(siteId, node.id, failoverMs);
          recovered++;
          this.recovered++;
          log.warn(
            {
              siteId,
              from: node.id,
              lastHeartbeat: node.heartbeatAt,
              replicatedAt: report.replicatedAt,
              rows: report.rows,
              tookMs: Math.round(performance.now() - started),
            },
            'took over a site database of a lost node, from its replica',
          );
        } catch (err) {
          logJobFailure(log, err, 'a site database of a lost node could not be taken over; trying again', {
            siteId,
            from: node.id,
          });
        }
      }
    }
    return recovered;
  }
}
