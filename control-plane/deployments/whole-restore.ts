// A site restored whole to one instant (docs/deployments.md): its files, functions and cron jobs from
// its history and its database from its replica, to the same second, as one deployment of the site's
// history that records the database's restore. Everything that can refuse is checked before anything
// changes; the database goes back first (its restore keeps the moment before it, `restoredFrom`), then
// the files switch, and a switch that fails puts the database back to that moment. Undone by restoring
// the site whole to `restoredFrom`. What the pair would change is shown first by the snapshot with
// `database`, read from the instant's branch of the database (database-branches/).
import { BerthError, notFound } from '../errors.ts';
import type { Actor, Deps } from '../deps.ts';
import { logJobFailure } from '../db/errors.ts';
import { instantBranch } from '../database-branches/branches.ts';
import type { RestorePoints } from '../site-databases/provider.ts';
import { StatementError } from '../site-databases/provider.ts';
import { type SiteRow, requireSite } from '../services/site-rows.ts';
import { heldState, siteSnapshot, stateAt, switchToState } from './deployments.ts';
import type { PageRequest } from '../services/pagination.ts';

/** Both sides are restored to the second. */
const floorSecond = (iso: string): string => new Date(Math.floor(Date.parse(iso) / 1000) * 1000).toISOString();
const later = (a: string, b: string): string => (a > b ? a : b);

/** Tables compared at most by a snapshot. */
const MAX_TABLES = 50;

async function requireSiteDatabase(deps: Deps, siteId: string): Promise<string> {
  const row = (await deps.db('databases').where({ site_id: siteId, status: 'READY' }).first('id')) as
    | { id: string }
    | undefined;
  if (!row) throw notFound('database');
  return row.id;
}

async function restorePoints(deps: Deps, siteId: string): Promise<RestorePoints> {
  try {
    return await deps.siteDatabases.restorePoints(siteId);
  } catch (err) {
    if (err instanceof StatementError) throw new BerthError('database_unavailable', err.message);
    throw err;
  }
}

/**
 * Refuses a moment the database's history does not hold: before it, `before_history` naming the
 * earliest moment both the files' and the database's histories hold; after its latest replicated
 * moment (writes still on their way to the replica), to be tried again shortly.
 */
function checkDatabaseHolds(points: RestorePoints, at: string, filesFrom: string): void {
  if (points.earliest && at >= points.earliest && points.latest && at <= points.latest) return;
  if (points.latest && at > points.latest)
    throw new BerthError(
      'restore_point_unavailable',
      `the database's history reaches ${points.latest}: its last writes are still on their way to its replica; try again in a few seconds`,
      { earliest: points.earliest, latest: points.latest },
    );
  const from = points.earliest ? later(points.earliest, filesFrom) : null;
  throw new BerthError(
    'before_history',
    from
      ? `the site can be restored whole to a moment from ${from} on: its database's history begins at ${points.earliest}, its files' at ${filesFrom}`
      : 'the database has no history to restore from yet; try again in a few seconds',
    { availableFrom: from },
  );
}

/** The site's files at `at`; before their history, `before_history` names the earliest moment both histories hold. */
async function filesAt(deps: Deps, site: SiteRow, at: string, points: RestorePoints) {
  try {
    return await stateAt(deps, site, at);
  } catch (err) {
    const filesFrom = err instanceof BerthError && err.code === 'before_history' ? err.details?.availableFrom : null;
    if (typeof filesFrom !== 'string') throw err;
    const from = points.earliest ? later(points.earliest, filesFrom) : filesFrom;
    throw new BerthError(
      'before_history',
      `the site can be restored whole to a moment from ${from} on: its files' history begins at ${filesFrom}${points.earliest ? `, its database's at ${points.earliest}` : ''}`,
      { availableFrom: from },
    );
  }
}

/**
 * Restores the site's files and database to the second of `at`, as one deployment. The database's
 * part is a database restore (restore_database), which is for the account's administrators: a
 * signed-in MEMBER may restore the files alone.
 */
export async function restoreSiteWhole(deps: Deps, actor: Actor, siteId: string, at: string) {
  if (actor.user && actor.user.role !== 'ADMIN')
    throw new BerthError(
      'forbidden',
      `restoring the database with the site is for the account's administrators; your role is ${actor.user.role}: restore the files alone`,
    );
  const site = await requireSite(deps, actor, siteId);
  await requireSiteDatabase(deps, siteId);
  const points = await restorePoints(deps, siteId);
  const { at: time, state, availableFrom } = await filesAt(deps, site, at, points);
  const second = floorSecond(time);
  checkDatabaseHolds(points, second, availableFrom);
  await heldState(deps, site, state);
  const restored = await deps.siteDatabases.restore(siteId, new Date(second)).catch((err: unknown) => {
    if (err instanceof StatementError) throw new BerthError('database_unavailable', err.message);
    throw err;
  });
  if (!restored.restored)
    throw new BerthError('restore_point_unavailable', `${second} is outside what the database can be restored to`, {
      earliest: restored.earliest,
      latest: restored.latest,
    });
  await deps.changes.publish({ kind: 'database', siteId });
  const databaseRestore = { restoredTo: restored.restoredTo, restoredFrom: restored.restoredFrom };
  deps.log.info({ siteId, ...databaseRestore }, 'restored a site database with its files');
  try {
    return await switchToState(deps, actor, site, state, {
      kind: 'RESTORE',
      message: `back to ${second}, database too`,
      restoredAt: second,
      databaseRestore,
    });
  } catch (err) {
    // The files stayed as they were: so does the database, put back to the moment before its restore.
    await undoDatabase(deps, site, restored.restoredFrom);
    throw err;
  }
}

async function undoDatabase(deps: Deps, site: SiteRow, restoredFrom: string): Promise<void> {
  try {
    await deps.siteDatabases.restore(site.id, new Date(restoredFrom));
    await deps.changes.publish({ kind: 'database', siteId: site.id });
  } catch (err) {
    logJobFailure(
      deps.log,
      err,
      'a site database restored with its files could not be put back after the files failed',
      {
        siteId: site.id,
        restoredFrom,
      },
    );
  }
}

/** A table of the database at the instant and now, by its rows. */
interface TableRows {
  name: string;
  rowsThen: number | null;
  rowsNow: number | null;
}

const TABLES = `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_litestream\\_%' ESCAPE '\\' AND name <> '_berth_migrations' ORDER BY name LIMIT ${MAX_TABLES}`;

/** Each table's rows in the database `name` (the site's, or a branch of it). */
async function tableRows(deps: Deps, name: string): Promise<Map<string, number>> {
  const read = (sql: string) => deps.siteDatabases.run(name, { sql, params: [] }, 'api', { readsOnly: true });
  const rows = new Map<string, number>();
  for (const table of (await read(TABLES)).rows.map((row) => String(row.name))) {
    const counted = await read(`SELECT count(*) AS n FROM "${table.replaceAll('"', '""')}"`);
    rows.set(table, Number(counted.rows[0]?.n ?? 0));
  }
  return rows;
}

/**
 * The database's side of a whole restore to `at`, before anything changes: whether its history holds
 * the moment (and from when both histories do), and each table's rows then, read from the instant's
 * branch of the database, beside its rows now.
 */
async function databaseSnapshot(deps: Deps, site: SiteRow, at: string, filesFrom: string) {
  await requireSiteDatabase(deps, site.id);
  const second = floorSecond(at);
  const points = await restorePoints(deps, site.id);
  const availableFrom = points.earliest ? later(points.earliest, filesFrom) : null;
  try {
    checkDatabaseHolds(points, second, filesFrom);
  } catch (err) {
    if (!(err instanceof BerthError)) throw err;
    return { at: second, restorable: false, reason: err.message, availableFrom, tables: [] as TableRows[] };
  }
  const then = await deps.onBranch(site.id, instantBranch(Date.parse(second)), (name) => tableRows(deps, name));
  const now = await tableRows(deps, site.id);
  const names = [...new Set([...then.keys(), ...now.keys()])].sort();
  const tables: TableRows[] = names.map((name) => ({
    name,
    rowsThen: then.get(name) ?? null,
    rowsNow: now.get(name) ?? null,
  }));
  return { at: second, restorable: true, reason: null, availableFrom, tables };
}

/** The site's snapshot at `at` (deployments.ts), with the database's side of a whole restore when asked. */
export async function snapshotWithDatabase(
  deps: Deps,
  actor: Actor,
  siteId: string,
  at: string,
  page: PageRequest,
  database: boolean,
) {
  const answer = await siteSnapshot(deps, actor, siteId, at, page);
  if (!database) return answer;
  const site = await requireSite(deps, actor, siteId);
  return {
    ...answer,
    snapshot: {
      ...answer.snapshot,
      database: await databaseSnapshot(deps, site, answer.snapshot.at, answer.snapshot.availableFrom),
    },
  };
}
