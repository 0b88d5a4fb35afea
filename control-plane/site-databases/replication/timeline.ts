// A database's restorable past, read from its replica's generations. A generation is an unbroken
// stretch of its history (a new one starts when the engine could not follow the log, and after every
// restore). Between two generations, and after the last one shipped, nothing was written that the
// replica lacks: the database then was what its generation held at its end.
import type { Generation } from './litestream.ts';

export interface RestoreRange {
  earliest: Date;
  latest: Date;
}

/** Whole seconds: restores are asked for and answered to the second. */
const floorSecond = (ms: number): Date => new Date(Math.floor(ms / 1000) * 1000);
const ceilSecond = (ms: number): Date => new Date(Math.ceil(ms / 1000) * 1000);

/**
 * From the oldest moment the replica holds (never before the retention) to the newest one whose writes
 * are all in the replica; null when the replica holds nothing yet.
 */
export function restorableRange(
  generations: Generation[],
  now: number,
  retentionMs: number,
  lagMs: number,
): RestoreRange | null {
  if (generations.length === 0) return null;
  const oldest = Math.min(...generations.map((g) => g.start.getTime()));
  const earliest = ceilSecond(Math.max(oldest, now - retentionMs));
  const latest = floorSecond(now - lagMs);
  return latest < earliest ? null : { earliest, latest };
}

/**
 * Which generation holds the database as it was at `at`, and whether to replay its log up to `at`
 * (inside the generation) or take its end (`at` after it, before the next one began).
 */
export function restoreChoice(generations: Generation[], at: Date): { generation: string; at?: Date } | null {
  const inside = generations
    .filter((g) => g.start <= at && at <= g.end)
    .sort((a, b) => b.end.getTime() - a.end.getTime())[0];
  if (inside) return { generation: inside.generation, at };
  const before = generations.filter((g) => g.start <= at).sort((a, b) => b.start.getTime() - a.start.getTime())[0];
  return before ? { generation: before.generation } : null;
}
