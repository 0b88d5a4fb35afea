// What a database's replica gives back, on this node: the moments it can be restored to, a restore to
// one of them, the latest state when the node that held it is lost, and, at a start, the following
// again of databases a stopped server left with writes not yet shipped.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Census } from '../protocol.ts';
import { type Restore, type RestorePoints, StatementError } from '../provider.ts';
import { OutsideRestoreRange } from '../replication/site-replicas.ts';
import type { RestoreRange } from '../replication/timeline.ts';
import { type SiteCalls, movedAway } from './calls.ts';
import type { DatabaseMoves } from './moves.ts';
import type { SiteDatabaseOptions } from './options.ts';
import type { SiteProcesses } from './site-processes.ts';

const noReplication = () =>
  new StatementError('unavailable', 'database replication is off on this node (BERTH_DATABASE_REPLICATION)');

/** Restores are asked for and answered to the second. */
const nextSecond = (ms: number): number => Math.floor(ms / 1000) * 1000 + 1000;

/** A restore refused: the moment asked for is outside what the replica holds (`range`, null: nothing yet). */
const refusedOutside = (range: RestoreRange | null): Restore => ({
  restored: false,
  earliest: range?.earliest.toISOString() ?? null,
  latest: range?.latest.toISOString() ?? null,
});

export class Restores {
  readonly #options: SiteDatabaseOptions;
  readonly #processes: SiteProcesses;
  readonly #calls: SiteCalls;
  readonly #moves: DatabaseMoves;

  constructor(options: SiteDatabaseOptions, processes: SiteProcesses, calls: SiteCalls, moves: DatabaseMoves) {
    this.#options = options;
    this.#processes = processes;
    this.#calls = calls;
    this.#moves = moves;
  }

  /**
   * A server stopped outright leaves the log of each database it had open, with writes the replicator
   * may not have shipped: each such database is followed again at the start (and left once idle).
   */
  async resumeReplication(): Promise<number> {
    const replicator = this.#options.replicas?.replicator;
    const root = this.#processes.root;
    if (!replicator || !fs.existsSync(root)) return 0;
    const unshipped = (await fsp.readdir(root)).filter(
      (name) =>
        /^[0-9a-f-]{36}$/.test(name) &&
        (fs.statSync(`${this.#processes.fileOf(name)}-wal`, { throwIfNoEntry: false })?.size ?? 0) > 0,
    );
    await Promise.all(unshipped.map((siteId) => replicator.watch(siteId, this.#processes.fileOf(siteId))));
    for (const siteId of unshipped) replicator.idle(siteId);
    return unshipped.length;
  }

  /**
   * Brings the database here from the latest state of its replica, when the node that held it is lost:
   * checked whole and put in place like an arriving copy. Null when the replica holds nothing.
   */
  async recoverFromReplica(siteId: string): Promise<{ census: Census; replicatedAt: Date } | null> {
    const replicas = this.#options.replicas;
    if (!replicas) throw noReplication();
    const dir = await this.#moves.incoming(siteId);
    try {
      const replicatedAt = await replicas.restoreLatest(siteId, path.join(dir, 'db.sqlite'));
      if (!replicatedAt) {
        await this.#moves.discardIncoming(dir);
        return null;
      }
      return { census: await this.#moves.install(siteId, dir), replicatedAt };
    } catch (err) {
      await this.#moves.discardIncoming(dir);
      if (err instanceof StatementError) throw err;
      throw new StatementError('unavailable', `the replica could not be restored: ${(err as Error).message}`);
    }
  }

  /** What the database's replica can give back. */
  async restorePoints(siteId: string): Promise<RestorePoints> {
    const replicas = this.#options.replicas;
    if (!replicas) throw noReplication();
    if (this.#calls.movedAway.has(siteId)) throw movedAway();
    const [range, replicaBytes] = await Promise.all([replicas.range(siteId), replicas.bytes(siteId)]);
    const status = replicas.status(siteId);
    return {
      earliest: range?.earliest.toISOString() ?? null,
      latest: range?.latest.toISOString() ?? null,
      replication: status
        ? {
            lagMs: status.lagMs,
            replicatedAt: status.replicatedAt?.toISOString() ?? null,
            replicaBytes,
            replicaMaxBytes: replicas.maxBytes,
          }
        : null,
    };
  }

  /**
   * Puts the database back as it was at `at`, between calls: the calls in flight finish, new ones wait.
   * The replica first receives every write made before, and the restored database starts a new stretch
   * of its history a second later, so the moment before the restore (`restoredFrom`) stays restorable.
   */
  async restore(siteId: string, at: Date): Promise<Restore> {
    const replicas = this.#options.replicas;
    if (!replicas) throw noReplication();
    // A moment outside the range is refused before the database's calls wait or its replication stops.
    const before = await replicas.range(siteId);
    if (!before || at < before.earliest || at > before.latest) return refusedOutside(before);
    return this.#calls.exclusively(siteId, async (file) => {
      await replicas.replicator.unwatch(siteId);
      const restoredFrom = nextSecond(Date.now());
      const dir = await this.#moves.incoming(siteId);
      let installed = false;
      try {
        await replicas.restoreTo(siteId, at, path.join(dir, 'db.sqlite'));
        const wait = restoredFrom - Date.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        await this.#moves.install(siteId, dir);
        installed = true;
      } catch (err) {
        if (err instanceof OutsideRestoreRange) return refusedOutside(err.range);
        throw new StatementError('unavailable', `the database could not be restored: ${(err as Error).message}`);
      } finally {
        if (!installed) {
          await this.#moves.discardIncoming(dir);
          // Left as it was: the engine follows it again.
          if (this.#processes.live(siteId)) await replicas.replicator.watch(siteId, file);
        }
      }
      return {
        restored: true,
        restoredTo: at.toISOString(),
        restoredFrom: new Date(restoredFrom).toISOString(),
      } as const;
    });
  }
}
