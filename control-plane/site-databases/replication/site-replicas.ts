// The replicas of a node's site databases, as the local provider uses them: the replicator follows the
// databases in use, and a database's past is read back from its replica, to a moment (time travel) or
// to its latest state (recovery on another node).
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../../log.ts';
import type { ReplicationReading } from '../../metrics.ts';
import { S3Driver } from '../../../storage/drivers/s3-driver.ts';
import {
  type Generation,
  listGenerations,
  type ReplicaTarget,
  type ReplicationTiming,
  replicaPlace,
  restoreReplica,
} from './litestream.ts';
import { type ReplicaStatus, Replicator } from './replicator.ts';
import { type RestoreRange, restorableRange, restoreChoice } from './timeline.ts';

export type { RestoreRange } from './timeline.ts';
export type { ReplicaStatus } from './replicator.ts';

const SIZE_EVERY_MS = 5 * 60_000;

export interface SiteReplicasOptions {
  target: ReplicaTarget;
  timing: ReplicationTiming;
  /** The runtime folder's part for the engine's configuration and its commands. */
  workDir: string;
  log: Logger;
  /** Of these databases, those the metadata places on this node: the engine replicates no other (see the replicator). */
  holds?: (siteIds: string[]) => Promise<Set<string>>;
}

/** A moment outside what the replica holds; `range` is what it does hold (null: nothing yet). */
export class OutsideRestoreRange extends Error {
  constructor(readonly range: RestoreRange | null) {
    super(
      range
        ? `the database can be restored to a moment from ${range.earliest.toISOString()} to ${range.latest.toISOString()}`
        : 'the database has no replicated history to restore from yet',
    );
  }
}

export class SiteReplicas {
  readonly #options: SiteReplicasOptions;
  readonly replicator: Replicator;
  readonly #store: S3Driver | null;
  /** Each followed database's replica bytes, measured every few minutes (listing a replica is not free). */
  readonly #bytes = new Map<string, number>();
  readonly #sizer: NodeJS.Timeout;
  #measuring: Promise<void> = Promise.resolve();

  constructor(options: SiteReplicasOptions) {
    this.#options = options;
    this.replicator = new Replicator({
      workDir: options.workDir,
      target: options.target,
      timing: options.timing,
      log: options.log,
      ...(options.holds ? { holds: options.holds } : {}),
    });
    const { target } = options;
    this.#store =
      target.kind === 's3'
        ? new S3Driver({
            bucket: target.bucket,
            prefix: target.prefix,
            region: target.region,
            forcePathStyle: target.forcePathStyle,
            ...(target.endpoint ? { endpoint: target.endpoint } : {}),
          })
        : null;
    this.#sizer = setInterval(() => {
      this.#measuring = this.#measuring.then(() => this.#measure());
    }, SIZE_EVERY_MS);
    this.#sizer.unref();
  }

  /** What /metrics, the dashboard and `berth admin nodes` show of this node's replication. */
  reading(): ReplicationReading {
    return {
      databases: this.replicator.statuses().map((s) => ({
        siteId: s.siteId,
        lagMs: s.lagMs,
        replicatedAt: s.replicatedAt,
        replicaBytes: this.#bytes.get(s.siteId) ?? null,
      })),
      restarts: this.replicator.restarts,
      errors: this.replicator.errors,
    };
  }

  async #measure(): Promise<void> {
    const followed = new Set(this.replicator.statuses().map((s) => s.siteId));
    for (const siteId of this.#bytes.keys()) if (!followed.has(siteId)) this.#bytes.delete(siteId);
    for (const siteId of followed) {
      try {
        this.#bytes.set(siteId, await this.bytes(siteId));
      } catch (err) {
        this.#options.log.warn({ err, siteId }, 'the size of a database replica could not be measured');
      }
    }
  }

  get retentionMs(): number {
    return this.#options.timing.retentionMs;
  }

  async #generations(siteId: string): Promise<Generation[]> {
    return listGenerations(siteId, this.#options.target, this.#options.timing, this.#options.workDir);
  }

  /** What the database's replica can give back now. */
  async range(siteId: string): Promise<RestoreRange | null> {
    const status = this.replicator.status(siteId);
    const generations = await this.#generations(siteId);
    const range = restorableRange(generations, Date.now(), this.retentionMs, status?.lagMs ?? 0);
    // The engine said it shipped this database's writes, yet the replica gives nothing back: worth a look.
    if (!range && status?.replicatedAt)
      this.#options.log.warn(
        { siteId, generations, lagMs: status.lagMs, replicatedAt: status.replicatedAt },
        'a site database’s replica holds no restorable moment though its writes were shipped',
      );
    return range;
  }

  /**
   * Writes the database as it was at `at` to `out`. The database must be out of the replicator's set
   * (unwatch), so that everything written before is in the replica.
   */
  async restoreTo(siteId: string, at: Date, out: string): Promise<void> {
    const generations = await this.#generations(siteId);
    const range = restorableRange(generations, Date.now(), this.retentionMs, 0);
    const choice = range && at >= range.earliest && at <= range.latest ? restoreChoice(generations, at) : null;
    if (!choice) throw new OutsideRestoreRange(range);
    await restoreReplica(siteId, this.#options.target, this.#options.timing, this.#options.workDir, out, choice);
  }

  /** Writes the latest state the replica holds to `out`; says when that was shipped, or null when it holds nothing. */
  async restoreLatest(siteId: string, out: string): Promise<Date | null> {
    const latest = (await this.#generations(siteId)).sort((a, b) => b.end.getTime() - a.end.getTime())[0];
    if (!latest) return null;
    await restoreReplica(siteId, this.#options.target, this.#options.timing, this.#options.workDir, out, {
      generation: latest.generation,
    });
    return latest.end;
  }

  status(siteId: string): ReplicaStatus | null {
    return this.replicator.status(siteId);
  }

  /** The bytes the database's replica takes. */
  async bytes(siteId: string): Promise<number> {
    const place = replicaPlace(this.#options.target, siteId);
    if (this.#store) return this.#store.treeBytes(place.slice(this.#prefix.length));
    return folderBytes(place);
  }

  /** Removes the database's replica: its database is deleted, and its history with it. */
  async discard(siteId: string): Promise<void> {
    await this.replicator.unwatch(siteId);
    const place = replicaPlace(this.#options.target, siteId);
    if (this.#store) await this.#store.removeTree(place.slice(this.#prefix.length));
    else await fsp.rm(place, { recursive: true, force: true });
  }

  get #prefix(): string {
    return this.#options.target.kind === 's3' ? this.#options.target.prefix : '';
  }

  async close(): Promise<void> {
    clearInterval(this.#sizer);
    await this.#measuring;
    await this.replicator.close();
    await this.#store?.close();
  }
}

async function folderBytes(dir: string): Promise<number> {
  let bytes = 0;
  let entries;
  try {
    entries = await fsp.readdir(dir, { withFileTypes: true, recursive: true });
  } catch {
    return 0;
  }
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    bytes += (await fsp.stat(path.join(entry.parentPath, entry.name)).catch(() => ({ size: 0 }))).size;
  }
  return bytes;
}
