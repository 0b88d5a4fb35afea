// Tallies in the metadata (table site_analytics): written in batches, read back for a range, and folded
// as they age — minutes older than two days into hours, hours older than 90 days into days, days older
// than two years removed — so a site's storage is bounded (at most ~2,900 minute, 2,200 hour and 730
// day rows per node's worth of flushes) and every count stays in exactly one row.
import type { Knex } from 'knex';
import type { Db } from '../db/metadata.ts';
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

/** Writes tallies, all or none. */
export async function writeTallies(db: Db, tallies: PeriodTally[]): Promise<void> {
  const rows = tallies.map(toRow);
  await db.transaction(async (trx) => {
    for (let i = 0; i < rows.length; i += INSERT_BATCH)
      await trx('site_analytics').insert(rows.slice(i, i + INSERT_BATCH));
  });
}

/** The tallies of these sites that start in [from, to) (epoch seconds), in no particular order. */
export async function readTallies(db: Db, siteIds: string[], from: number, to: number): Promise<PeriodTally[]> {
  if (siteIds.length === 0) return [];
  const rows: AnalyticsRow[] = await db('site_analytics')
    .whereIn('site_id', siteIds)
    .andWhere('at', '>=', from)
    .andWhere('at', '<', to)
    .select();
  return rows.map(fromRow);
}

/**
 * Folds the rows of resolution `period` that started before `before` into rows of `into` seconds, in
 * batches, one transaction each. Two nodes folding at once cannot count a row twice: a transaction
 * that deletes fewer rows than it read (another took them) is rolled back. Returns the rows folded.
 */
async function foldInto(db: Db, period: number, into: number, before: number): Promise<number> {
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
export async function foldAged(db: Db, nowSeconds: number): Promise<number> {
  try {
    let changed = await foldInto(db, MINUTE, HOUR, nowSeconds - KEPT[MINUTE]);
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
export function foldingEveryMinute(db: Db, now: () => Date): () => Promise<void> {
  let last = Number.NEGATIVE_INFINITY;
  return async () => {
    const seconds = Math.floor(now().getTime() / 1000);
    if (seconds - last < MINUTE) return;
    last = seconds;
    await foldAged(db, seconds);
  };
}
