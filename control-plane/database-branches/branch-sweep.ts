// Branches end with their previews. Every minute, on every node: the branches of deployments no longer
// open (published, cancelled, failed or past their day) and those of instants unused for a day are
// dropped, each by the node whose deletion of its row counts (branches.ts, dropBranch); this node's
// branch folders that no row places here (dropped while it was away, or left by a move) are removed;
// and the bytes of the branches here are measured again, for the account's storage.
import { logJobFailure } from '../db/errors.ts';
import type { Deps } from '../deps.ts';
import { OPEN_FOR_MS } from '../history/site-history.ts';
import { parseDatabaseName } from '../site-databases/branch-names.ts';
import type { BranchRow } from './branches.ts';
import { dropBranch } from './branches.ts';

const SWEEP_MS = 60_000;
/** An instant's branch unused this long is dropped (its preview makes it again when asked). */
export const INSTANT_BRANCH_IDLE_MS = 24 * 3600_000;
/** A making claimed this long ago was a maker that stopped. */
const STALE_MAKING_MS = 10 * 60_000;

export async function sweepBranches(deps: Deps): Promise<{ dropped: number; removedHere: number }> {
  const now = deps.now().getTime();
  const ended = (await deps
    .db('database_branches as b')
    .leftJoin('deployments as d', 'd.id', 'b.deployment_id')
    .where((q) =>
      q
        .where((open) =>
          open.whereNotNull('b.deployment_id').andWhere((gone) =>
            gone
              .whereNull('d.id')
              .orWhereNot('d.status', 'UPLOADING')
              .orWhere('d.created_at', '<', new Date(now - OPEN_FOR_MS).toISOString()),
          ),
        )
        .orWhere((idle) =>
          idle
            .whereNull('b.deployment_id')
            .andWhere('b.used_at', '<', new Date(now - INSTANT_BRANCH_IDLE_MS).toISOString()),
        )
        .orWhere((stale) =>
          stale
            .where('b.status', 'MAKING')
            .andWhere('b.claimed_at', '<', new Date(now - STALE_MAKING_MS).toISOString()),
        ),
    )
    .select('b.site_id', 'b.branch')) as Array<{ site_id: string; branch: string }>;
  for (const { site_id, branch } of ended) await dropBranch(deps, site_id, branch);

  const local = deps.localBranches;
  await local.dropBranchLeftovers();
  let removedHere = 0;
  for (const name of await local.branchesHere()) {
    const { siteId, branch } = parseDatabaseName(name);
    const row = (await deps.db('database_branches').where({ site_id: siteId, branch }).first()) as
      | BranchRow
      | undefined;
    if (row?.status === 'MAKING') continue;
    if (!row || row.status === 'FAILED' || (row.node_id !== null && row.node_id !== deps.nodeId)) {
      await local.dropBranch(name);
      removedHere++;
      continue;
    }
    const bytes = await local.size(name);
    if (bytes !== Number(row.bytes))
      await deps.db('database_branches').where({ site_id: siteId, branch, status: 'READY' }).update({ bytes });
  }
  return { dropped: ended.length, removedHere };
}

/** The sweep, every minute on every node, one round at a time. */
export class BranchSweep {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;

  constructor(private readonly deps: Deps) {}

  start(): void {
    this.#timer = setInterval(() => this.sweep(), SWEEP_MS);
    this.#timer.unref();
  }

  /** A round now, unless one runs. */
  sweep(): Promise<void> {
    this.#running ??= this.#round().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  async #round(): Promise<void> {
    try {
      const swept = await sweepBranches(this.deps);
      if (swept.dropped > 0 || swept.removedHere > 0) this.deps.log.info(swept, 'dropped branches of site databases');
    } catch (err) {
      logJobFailure(this.deps.log, err, 'sweeping the branches of site databases failed');
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#running;
  }
}
