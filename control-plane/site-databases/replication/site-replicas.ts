// The replicas of a node's site databases, as the local provider uses them: the replicator follows the
// databases in use, and a database's past is read back from its replica, to a moment (time travel) or
// to its latest state (recovery on another node).
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../../log.ts';
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

export interface SiteReplicasOptions {
  target: ReplicaTarget;
  timing: ReplicationTiming;
  /** The runtime folder's part for the engine's configuration and its commands. */
  workDir: string;
  log: Logger;
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

  constructor(options: SiteReplicasOptions) {
    this.#options = options;
    this.replicator = new Replicator({
      workDir: options.workDir,
      target: options.target,
      timing: options.timing,
      log: options.log,
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
  }

  get retentionMs(): number {
    return this.#options.timing.retentionMs;
  }

  async #generations(siteId: string, file: string): Promise<Generation[]> {
    return listGenerations({ siteId, file }, this.#options.target, this.#options.timing, this.#options.workDir);
  }

  /** What the database's replica can give back now. */
  async range(siteId: string, file: string): Promise<RestoreRange | null> {
    const lagMs = this.replicator.status(siteId)?.lagMs ?? 0;
    return restorableRange(await this.#generations(siteId, file), Date.now(), this.retentionMs, lagMs);
  }

  /**
   * Writes the database as it was at `at` to `out`. The database must be out of the replicator's set
   * (unwatch), so that everything written before is in the replica.
   */
  async restoreTo(siteId: string, file: string, at: Date, out: string): Promise<void> {
    const generations = await this.#generations(siteId, file);
    const range = restorableRange(generations, Date.now(), this.retentionMs, 0);
    const choice = range && at >= range.earliest && at <= range.latest ? restoreChoice(generations, at) : null;
    if (!choice) throw new OutsideRestoreRange(range);
    await restoreReplica(
      { siteId, file },
      this.#options.target,
      this.#options.timing,
      this.#options.workDir,
      out,
      choice,
    );
  }

  /** Writes the latest state the replica holds to `out`; false when it holds nothing. */
  async restoreLatest(siteId: string, file: string, out: string): Promise<boolean> {
    const latest = (await this.#generations(siteId, file)).sort((a, b) => b.end.getTime() - a.end.getTime())[0];
    if (!latest) return false;
    await restoreReplica({ siteId, file }, this.#options.target, this.#options.timing, this.#options.workDir, out, {
      generation: latest.generation,
    });
    return true;
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
