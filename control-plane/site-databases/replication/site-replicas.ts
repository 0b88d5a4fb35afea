// The replicas of a node's site databases, as the local provider uses them: the replicator follows the
// databases in use, and a database's past is read back from its replica, to a moment (time travel) or
// to its latest state (recovery on another node). Each replica is kept within its bytes
// (replica-bound.ts), checked as its database ships log and every few minutes.
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Knex } from 'knex';
import type { Logger } from '../../log.ts';
import type { ReplicationReading } from '../../metrics.ts';
import { S3Driver } from '../../../storage/drivers/s3-driver.ts';
import {
  type Generation,
  generationPlace,
  listGenerations,
  type ReplicaTarget,
  type ReplicationTiming,
  replicaFileOf,
  replicaPlace,
  restoreReplica,
} from './litestream.ts';
import { boundPlan, type MeasuredGeneration } from './replica-bound.ts';
import { type ReplicaStatus, Replicator } from './replicator.ts';
import { type RestoreRange, restorableRange, restoreChoice } from './timeline.ts';

export type { RestoreRange } from './timeline.ts';
export type { ReplicaStatus } from './replicator.ts';

/** A followed database's replica is measured at least this often (listing a replica is not free)... */
const SIZE_EVERY_MS = 5 * 60_000;
/** ...and sooner once its database has shipped this share of the bound since the last time. */
const SHIPPED_SHARE = 1 / 8;
const LOOK_EVERY_MS = 5000;

export interface SiteReplicasOptions {
  target: ReplicaTarget;
  timing: ReplicationTiming;
  /** The runtime folder's part for the engine's configuration and its commands. */
  workDir: string;
  /** The bytes one replica may take (BERTH_DATABASE_REPLICA_MAX_BYTES). */
  maxBytes: number;
  /** A replica was measured: what it takes now, for the account's usage. */
  onBytes?: (siteId: string, bytes: number) => Promise<void>;
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
  /** Each followed database's replica bytes as last measured, and its shipped log bytes then. */
  readonly #bytes = new Map<string, number>();
  readonly #measured = new Map<string, { at: number; shipped: number }>();
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
    }, LOOK_EVERY_MS);
    this.#sizer.unref();
  }

  /** What /metrics, the dashboard and `berth admin nodes` show of this node's replication. */
  /** What the node's heartbeat says of its replication: the reading, and why it is stalled, if it is. */
  report(): ReplicationReading & { stalled: string | null } {
    return { ...this.reading(), stalled: this.replicator.stalled() };
  }

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

  /** Measures, and keeps within the bound, each followed replica that is due (see SIZE_EVERY_MS). */
  async #measure(): Promise<void> {
    const statuses = this.replicator.statuses();
    const followed = new Set(statuses.map((s) => s.siteId));
    for (const siteId of this.#bytes.keys()) if (!followed.has(siteId)) this.#bytes.delete(siteId);
    for (const siteId of this.#measured.keys()) if (!followed.has(siteId)) this.#measured.delete(siteId);
    const now = Date.now();
    for (const { siteId, shippedBytes } of statuses) {
      const last = this.#measured.get(siteId);
      const due =
        !last ||
        now - last.at >= SIZE_EVERY_MS ||
        shippedBytes - last.shipped >= this.#options.maxBytes * SHIPPED_SHARE;
      if (!due) continue;
      try {
        const { bytes, settled } = await this.#keepWithinBound(siteId);
        this.#bytes.set(siteId, bytes);
        // A generation being begun: measured again at the next look, when the older one can go.
        if (settled) this.#measured.set(siteId, { at: now, shipped: shippedBytes });
        else this.#measured.delete(siteId);
        await this.#options.onBytes?.(siteId, bytes);
      } catch (err) {
        this.#options.log.warn({ err, siteId }, 'the size of a database replica could not be measured or bounded');
      }
    }
  }

  /** Drops the replica's oldest generations past the bound (replica-bound.ts); returns the bytes it keeps. */
  async #keepWithinBound(siteId: string): Promise<{ bytes: number; settled: boolean }> {
    const place = replicaPlace(this.#options.target, siteId);
    const byGeneration = new Map<string, { bytes: number; snapshotBytes: number }>();
    let total = 0;
    for await (const { name, bytes } of this.#files(place)) {
      total += bytes;
      const file = replicaFileOf(name);
      if (!file) continue;
      const sum = byGeneration.get(file.generation) ?? { bytes: 0, snapshotBytes: 0 };
      sum.bytes += bytes;
      if (file.snapshot) sum.snapshotBytes += bytes;
      byGeneration.set(file.generation, sum);
    }
    if (total <= this.#options.maxBytes / 2) return { bytes: total, settled: true };
    const measured: MeasuredGeneration[] = (await this.#generations(siteId)).flatMap((g) => {
      const sum = byGeneration.get(g.generation);
      return sum ? [{ generation: g.generation, end: g.end, ...sum }] : [];
    });
    const listedBytes = measured.reduce((sum, g) => sum + g.bytes, 0);
    const plan = boundPlan(measured, total - listedBytes, this.#options.maxBytes);
    for (const generation of plan.drop) {
      const tree = generationPlace(place, generation);
      if (this.#store) await this.#store.removeTree(tree.slice(this.#prefix.length));
      else await fsp.rm(tree, { recursive: true, force: true });
    }
    if (plan.drop.length > 0)
      this.#options.log.info(
        { siteId, dropped: plan.drop, bytes: plan.keptBytes, maxBytes: this.#options.maxBytes },
        'a database replica passed its bound: its oldest history was dropped',
      );
    if (plan.renew) await this.replicator.renew(siteId);
    return { bytes: plan.keptBytes, settled: plan.settled };
  }

  /** The files of a replica: names relative to its place, and their bytes. */
  async *#files(place: string): AsyncIterable<{ name: string; bytes: number }> {
    if (this.#store) {
      yield* this.#store.treeObjects(place.slice(this.#prefix.length));
      return;
    }
    let entries;
    try {
      entries = await fsp.readdir(place, { withFileTypes: true, recursive: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      if (!entry.isFile()) continue;
      const full = path.join(entry.parentPath, entry.name);
      const { size } = await fsp.stat(full).catch(() => ({ size: 0 }));
      yield { name: path.relative(place, full), bytes: size };
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
    let bytes = 0;
    for await (const file of this.#files(replicaPlace(this.#options.target, siteId))) bytes += file.bytes;
    return bytes;
  }

  get maxBytes(): number {
    return this.#options.maxBytes;
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

/** A node measured a database's replica: what the account's usage shows of it (services/storage-quota.ts). */
export async function recordReplicaBytes(store: { db: Knex }, siteId: string, bytes: number): Promise<void> {
  await store
    .db('database_replicas')
    .insert({ site_id: siteId, bytes, measured_at: new Date().toISOString() })
    .onConflict('site_id')
    .merge(['bytes', 'measured_at']);
}
