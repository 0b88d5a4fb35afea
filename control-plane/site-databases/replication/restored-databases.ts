// The last step of `berth admin restore`: each site database the archive held is brought forward to the
// latest state its replica holds (carried in the archive, or in the object store the archive points
// at), when that state is later than the archive's snapshot of it. A replica that cannot be read, or
// holds nothing later, leaves the archived snapshot in place; the restore goes on either way.
import crypto from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { openSnapshot } from '../../../storage/backup/sqlite-snapshot.ts';
import { syncPath } from '../../../storage/durable.ts';
import { type ReplicaTarget, type ReplicationTiming, listGenerations, restoreReplica } from './litestream.ts';

export interface RestoredDatabase {
  siteId: string;
  /** When the archive's snapshot of it was finished. */
  snapshotAt: string;
}

/** Which state a restored database was left in: its replica's latest (and when that was), or the archive's. */
export type LatestOutcome =
  | { siteId: string; used: 'replica'; replicatedAt: string }
  | { siteId: string; used: 'archive'; why: string };

export interface BringToLatestOptions {
  /** The restored data dir: each database at sites/<siteId>/db.sqlite. */
  dataDir: string;
  databases: RestoredDatabase[];
  target: ReplicaTarget;
  timing: ReplicationTiming;
  /** A private folder for the engine's configuration files. */
  workDir: string;
}

/**
 * How much later than the snapshot a replica must end to be taken. The engine dates a generation's end
 * in whole seconds, by when it wrote its last log segment, a moment after it read the log: a replica
 * that ends a whole second after the snapshot was finished holds every write the snapshot holds.
 */
const MARGIN_MS = 1000;

export async function bringToLatest(options: BringToLatestOptions): Promise<LatestOutcome[]> {
  const outcomes: LatestOutcome[] = [];
  for (const { siteId, snapshotAt } of options.databases) {
    try {
      outcomes.push(await bringOne(options, siteId, Date.parse(snapshotAt)));
    } catch (err) {
      outcomes.push({ siteId, used: 'archive', why: `its replica could not be read: ${(err as Error).message}` });
    }
  }
  return outcomes;
}

async function bringOne(options: BringToLatestOptions, siteId: string, snapshotAt: number): Promise<LatestOutcome> {
  const file = path.join(options.dataDir, 'sites', siteId, 'db.sqlite');
  const generations = await listGenerations(siteId, options.target, options.timing, options.workDir);
  const latest = generations.sort((a, b) => b.end.getTime() - a.end.getTime())[0];
  if (!latest) return { siteId, used: 'archive', why: 'its replica holds nothing' };
  if (!(latest.end.getTime() >= snapshotAt + MARGIN_MS)) {
    return {
      siteId,
      used: 'archive',
      why: `its replica ends at ${latest.end.toISOString()}, no later than the archive's snapshot`,
    };
  }
  // Beside the database, so the rename that puts it in place is atomic; *.tmp, so a start sweeps a leftover.
  const temp = `${file}.latest-${crypto.randomBytes(6).toString('hex')}.tmp`;
  let placed = false;
  try {
    await restoreReplica(siteId, options.target, options.timing, options.workDir, temp, {
      generation: latest.generation,
    });
    const restored = openSnapshot(temp);
    try {
      restored.check();
    } finally {
      restored.close();
    }
    await syncPath(temp);
    await fsp.rename(temp, file);
    placed = true;
    await syncPath(path.dirname(file));
  } finally {
    if (!placed)
      for (const leftover of [temp, `${temp}.tmp`, `${temp}-wal`, `${temp}-shm`])
        await fsp.rm(leftover, { force: true });
  }
  return { siteId, used: 'replica', replicatedAt: latest.end.toISOString() };
}
