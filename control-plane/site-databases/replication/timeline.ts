// A database's restorable past, read from its replica's generations. A generation is an unbroken
// stretch of its history (a new one starts when the engine could not follow the log, and after every
// restore). Between two generations, and after the last one shipped, nothing was written that the
// replica lacks: the database then was what its generation held at its end.
//
// The engine prints a generation's bounds to the second, cut short (12:00:03.4 prints as 12:00:03),
// and restores by the exact times. So a generation surely covers a moment from the second after its
// printed start to its printed end; a moment in its first second counts as before it.
import type { Generation } from './litestream.ts';

/** The moment from which a generation surely covers what it holds. */
const coveredFrom = (g: Generation): number => g.start.getTime() + 1000;

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
  const oldest = Math.min(...generations.map(coveredFrom));
  const earliest = ceilSecond(Math.max(oldest, now - retentionMs));
  const latest = floorSecond(now - lagMs);
  return latest < earliest ? null : { earliest, latest };
}

/**
 * Which generation holds the database as it was at `at`, and whether to replay its log up to `at`
 * (inside the generation) or take its end (`at` after it, before the next one began).
 */
export function restoreChoice(generations: Generation[], at: Date): { generation: string; at?: Date } | null {
  const moment = at.getTime();
  const inside = generations
    .filter((g) => coveredFrom(g) <= moment && moment <= g.end.getTime())
    .sort((a, b) => b.end.getTime() - a.end.getTime())[0];
  if (inside) return { generation: inside.generation, at };
  const before = generations.filter((g) => coveredFrom(g) <= moment).sort((a, b) => coveredFrom(b) - coveredFrom(a))[0];
  return before ? { generation: before.generation } : null;
}
