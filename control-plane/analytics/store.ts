// Tallies in the metadata (table site_analytics): written in batches, each minute's counts added to its
// hour's row as well, and read back for a range at the coarsest resolution it allows, so that a read of
// whole hours costs a row per site and hour, not 60. As rows age, minutes older than two days are removed
// (their hours hold them), hours older than 90 days fold into days, days older than two years are
// removed: a site's storage is bounded (at most ~2,900 minute rows per node that served it, ~2,200 hour
// and 730 day rows), and at each resolution every count is in exactly one row.
import type { Knex } from 'knex';
import { forUpdate } from '../db/locks.ts';
import { decodeHistogram, encodeHistogram } from './histogram.ts';
import { MAX_PATH_CHARS, STORED_TOP, type Tally, addTally, newTally, top } from './tally.ts';

export const MINUTE = 60;
export const HOUR = 3600;
export const DAY = 86_400;

/** How long each resolution is kept, in seconds; a row older than its resolution's age is folded. */
export const KEPT = { [MINUTE]: 48 * HOUR, [HOUR]: 90 * DAY, [DAY]: 730 * DAY } as const;

/** Rows folded in one transaction. */
const FOLD_BATCH = 5000;
/** Rows written in one insert. */
const INSERT_BATCH = 200;

/** One site's tally for the period starting at `at` (epoch seconds), `period` seconds long. */
export interface PeriodTally {
  siteId: string;
  at: number;
  period: number;
  tally: Tally;
}

interface AnalyticsRow {
  id: number;
  site_id: string;
  at: number | string;
  period: number;
  requests: number | string;
  status_2xx: number | string;
  status_3xx: number | string;
  status_4xx: number | string;
  status_5xx: number | string;
  bytes_out: number | string;
  function_invocations: number | string;
  function_errors: number | string;
  cold_starts: number | string;
  database_calls: number | string;
  latency: string;
  function_latency: string;
  paths: string;
  referrers: string;
}

const encodeTop = (map: Map<string, number>): string => JSON.stringify(top(map, STORED_TOP));

function decodeTop(text: string): Map<string, number> {
  return new Map(JSON.parse(text) as Array<[string, number]>);
}

function toRow({ siteId, at, period, tally }: PeriodTally): Omit<AnalyticsRow, 'id'> {
  return {
    site_id: siteId,
    at,
    period,
    requests: tally.requests,
    status_2xx: tally.status[0],
    status_3xx: tally.status[1],
    status_4xx: tally.status[2],
    status_5xx: tally.status[3],
    bytes_out: tally.bytesOut,
    function_invocations: tally.functionInvocations,
    function_errors: tally.functionErrors,
    cold_starts: tally.coldStarts,
    database_calls: tally.databaseCalls,
    latency: encodeHistogram(tally.latency),
    function_latency: encodeHistogram(tally.functionLatency),
    paths: encodeTop(tally.paths),
    referrers: encodeTop(tally.referrers),
  };
}

/** A row as read (PostgreSQL returns its 64-bit integers as strings). */
function fromRow(row: AnalyticsRow): PeriodTally {
  return {
    siteId: row.site_id,
    at: Number(row.at),
    period: Number(row.period),
    tally: {
      requests: Number(row.requests),
      status: [Number(row.status_2xx), Number(row.status_3xx), Number(row.status_4xx), Number(row.status_5xx)],
      bytesOut: Number(row.bytes_out),
      functionInvocations: Number(row.function_invocations),
      functionErrors: Number(row.function_errors),
      coldStarts: Number(row.cold_starts),
      databaseCalls: Number(row.database_calls),
      latency: decodeHistogram(row.latency),
      functionLatency: decodeHistogram(row.function_latency),
      paths: decodeTop(row.paths),
      referrers: decodeTop(row.referrers),
    },
  };
}

/** A path as kept: at most MAX_PATH_CHARS characters. */
export const keptPath = (path: string): string => (path.length > MAX_PATH_CHARS ? path.slice(0, MAX_PATH_CHARS) : path);

/** The minute tallies among `tallies` added up by site and hour. */
function hoursOf(tallies: PeriodTally[]): PeriodTally[] {
  const hours = new Map<string, PeriodTally>();
  for (const { siteId, at, period, tally } of tallies) {
    if (period !== MINUTE) continue;
    const hour = Math.floor(at / HOUR) * HOUR;
    const key = `${siteId} ${hour}`;
    let into = hours.get(key);
    if (!into) {
      into = { siteId, at: hour, period: HOUR, tally: newTally() };
      hours.set(key, into);
    }
    addTally(into.tally, tally);
  }
  return [...hours.values()];
}

/**
 * Adds `hour` to a row of its site and hour, or writes it as a new one. Writers of the same hour take
 * turns on its first row; two that find none both insert, and the hour's rows still add up.
 */
async function addToHour(trx: Knex.Transaction, hour: PeriodTally): Promise<void> {
  const found: AnalyticsRow | undefined = (
    await forUpdate(
      trx,
      trx('site_analytics').where({ site_id: hour.siteId, at: hour.at, period: HOUR }).orderBy('id').limit(1).select(),
    )
  )[0];
  if (!found) {
    await trx('site_analytics').insert(toRow(hour));
    return;
  }
  const sum = fromRow(found);
  addTally(sum.tally, hour.tally);
  await trx('site_analytics').where({ id: found.id }).update(toRow(sum));
}

/** Writes tallies, all or none; minute ones are added to their hours' rows in the same transaction. */
export async function writeTallies(db: Knex, tallies: PeriodTally[]): Promise<void> {
  const rows = tallies.map(toRow);
  await db.transaction(async (trx) => {
    for (let i = 0; i < rows.length; i += INSERT_BATCH)
      await trx('site_analytics').insert(rows.slice(i, i + INSERT_BATCH));
    for (const hour of hoursOf(tallies)) await addToHour(trx, hour);
  });
}

/**
 * The tallies of these sites in [from, to) (epoch seconds), in no particular order, each count read
 * once, at the coarsest resolution a series at `step` seconds allows: the whole hours from their hour
 * rows (or the day rows older hours were folded into), the partial hours at the edges from their minute
 * rows; at a minute step, minute rows wherever they are still kept. Rows read: about one per site, node
 * and hour, plus the edges' minutes.
 */
export async function readTallies(
  db: Knex,
  siteIds: string[],
  from: number,
  to: number,
  step: number,
  nowSeconds: number,
): Promise<PeriodTally[]> {
  if (siteIds.length === 0) return [];
  const firstHour = Math.min(Math.ceil(from / HOUR) * HOUR, to);
  const endHour = Math.max(firstHour, Math.floor(to / HOUR) * HOUR);
  // Minutes of the hours from here on are all kept still: a fold removes only older ones.
  const minutesKept = Math.ceil((nowSeconds - KEPT[MINUTE]) / HOUR) * HOUR;
  const hoursEnd = step < HOUR ? Math.min(endHour, Math.max(firstHour, minutesKept)) : endHour;
  const rows: AnalyticsRow[] = await db('site_analytics')
    .whereIn('site_id', siteIds)
    .andWhere((range) =>
      range
        .where((hours) =>
          hours.whereIn('period', [HOUR, DAY]).andWhere('at', '>=', firstHour).andWhere('at', '<', hoursEnd),
        )
        .orWhere((edges) =>
          edges
            .where('period', MINUTE)
            .andWhere((at) =>
              at
                .where((head) => head.where('at', '>=', from).andWhere('at', '<', firstHour))
                .orWhere((tail) => tail.where('at', '>=', hoursEnd).andWhere('at', '<', to)),
            ),
        ),
    )
    .select();
  return rows.map(fromRow);
}

/** Adds every minute row there is to its hour's row: what a store whose hours hold their minutes begins with. */
export async function addMinutesToHours(db: Knex): Promise<void> {
  await db.transaction(async (trx) => {
    let after = 0;
    const hours = new Map<string, PeriodTally>();
    for (;;) {
      const rows: AnalyticsRow[] = await trx('site_analytics')
        .where({ period: MINUTE })
        .andWhere('id', '>', after)
        .orderBy('id')
        .limit(FOLD_BATCH)
        .select();
      if (rows.length === 0) break;
      after = rows[rows.length - 1]!.id;
      for (const hour of hoursOf(rows.map(fromRow))) {
        const key = `${hour.siteId} ${hour.at}`;
        const into = hours.get(key);
        if (into) addTally(into.tally, hour.tally);
        else hours.set(key, hour);
      }
    }
    for (const hour of hours.values()) await addToHour(trx, hour);
  });
}

/**
 * Folds the rows of resolution `period` that started before `before` into rows of `into` seconds, in
 * batches, one transaction each. Two nodes folding at once cannot count a row twice: a transaction
 * that deletes fewer rows than it read (another took them) is rolled back. Returns the rows folded.
 */
async function foldInto(db: Knex, period: number, into: number, before: number): Promise<number> {
  let folded = 0;
  for (;;) {
    const done = await db.transaction(async (trx) => {
      const rows: AnalyticsRow[] = await trx('site_analytics')
        .where({ period })
        .andWhere('at', '<', before)
        .orderBy('id')
        .limit(FOLD_BATCH)
        .select();
      if (rows.length === 0) return 0;
      const merged = new Map<string, PeriodTally>();
      for (const row of rows.map(fromRow)) {
        const at = Math.floor(row.at / into) * into;
        const key = `${row.siteId} ${at}`;
        let target = merged.get(key);
        if (!target) {
          target = { siteId: row.siteId, at, period: into, tally: newTally() };
          merged.set(key, target);
        }
        addTally(target.tally, row.tally);
      }
      await deleteExactly(
        trx,
        rows.map((row) => row.id),
      );
      const inserts = [...merged.values()].map(toRow);
      for (let i = 0; i < inserts.length; i += INSERT_BATCH)
        await trx('site_analytics').insert(inserts.slice(i, i + INSERT_BATCH));
      return rows.length;
    });
    folded += done;
    if (done < FOLD_BATCH) return folded;
  }
}

class FoldRace extends Error {}

async function deleteExactly(trx: Knex.Transaction, ids: number[]): Promise<void> {
  let deleted = 0;
  for (let i = 0; i < ids.length; i += 500)
    deleted += await trx('site_analytics')
      .whereIn('id', ids.slice(i, i + 500))
      .delete();
  if (deleted !== ids.length) throw new FoldRace('another node folded these rows first');
}

/** Folds what has aged at `nowSeconds`; returns the rows folded or removed. */
export async function foldAged(db: Knex, nowSeconds: number): Promise<number> {
  try {
    // Aged minutes are removed only: their hours' rows hold them already.
    let changed = await db('site_analytics')
      .where({ period: MINUTE })
      .andWhere('at', '<', nowSeconds - KEPT[MINUTE])
      .delete();
    changed += await foldInto(db, HOUR, DAY, nowSeconds - KEPT[HOUR]);
    changed += await db('site_analytics')
      .where({ period: DAY })
      .andWhere('at', '<', nowSeconds - KEPT[DAY])
      .delete();
    return changed;
  } catch (err) {
    if (err instanceof FoldRace) return 0;
    throw err;
  }
}

/** `foldAged` at most once a minute of `now`'s clock, for a node to run after each of its writes. */
export function foldingEveryMinute(db: Knex, now: () => Date): () => Promise<void> {
  let last = Number.NEGATIVE_INFINITY;
  return async () => {
    const seconds = Math.floor(now().getTime() / 1000);
    if (seconds - last < MINUTE) return;
    last = seconds;
    await foldAged(db, seconds);
  };
}
