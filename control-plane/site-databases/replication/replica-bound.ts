// What keeps one database's replica within its bytes (BERTH_DATABASE_REPLICA_MAX_BYTES): its oldest
// history goes first. The engine writes a replica as generations, each a full copy of the database and
// its log from then on; a restore needs a generation whole, so history is dropped a generation at a
// time, oldest first, and the newest (the one the engine writes to) is always kept. When the newest
// alone grows past half the bound and holds more log than copy, the engine is made to begin a new one
// (a fresh copy): the old one then holds only older history, and goes at a later check.
//
// So a replica stays within the bound plus the log the database ships between two checks, except that
// a database whose own copy passes half the bound keeps its newest generation whole: at most its copy
// and as much log again.

/** A generation of a replica, as listed (its end) and measured (its bytes, of which its full copies). */
export interface MeasuredGeneration {
  generation: string;
  end: Date;
  bytes: number;
  snapshotBytes: number;
}

export interface BoundPlan {
  /** Generations to remove, oldest first. */
  drop: string[];
  /** The engine should begin a new generation. */
  renew: boolean;
  /** The replica's bytes once the drops are done. */
  keptBytes: number;
  /** Nothing is under way: no generation is being begun, so the next check can wait for news. */
  settled: boolean;
}

/**
 * What to do with a replica of `generations` (restorable ones, as the engine lists them) plus
 * `otherBytes` (files of generations it does not list yet: one it has just begun) under `maxBytes`.
 */
export function boundPlan(generations: MeasuredGeneration[], otherBytes: number, maxBytes: number): BoundPlan {
  const byAge = [...generations].sort((a, b) => a.end.getTime() - b.end.getTime());
  let keptBytes = otherBytes + byAge.reduce((sum, g) => sum + g.bytes, 0);
  const drop: string[] = [];
  while (keptBytes > maxBytes && byAge.length > 1) {
    const oldest = byAge.shift()!;
    drop.push(oldest.generation);
    keptBytes -= oldest.bytes;
  }
  const newest = byAge.at(-1);
  // A generation just begun, not listed yet, is already the new one: never two at once.
  const renew =
    otherBytes === 0 &&
    newest !== undefined &&
    newest.bytes > maxBytes / 2 &&
    newest.bytes - newest.snapshotBytes > newest.snapshotBytes;
  return { drop, renew, keptBytes, settled: otherBytes === 0 && !renew };
}
