// A branch of a site's database for each preview (docs/deployments.md), so that nothing a preview writes
// reaches the live database: a deployment's preview runs its functions on a copy of the database as of
// the deployment's creation with the deployment's migrations applied on top; an instant's preview, and a
// published deployment's, on a copy as of that instant. A branch is made on its preview's first
// database call, by one maker at a time (its metadata row is the claim), beside the site's database on
// the node that holds it; one whose migrations fail is kept as that failure, never half migrated.
// Branches end with their previews (branch-sweep.ts).
import { BerthError } from '../errors.ts';
import { logJobFailure } from '../db/errors.ts';
import type { Deps } from '../deps.ts';
import { newId, timestamp } from '../deps.ts';
import { branchName } from '../site-databases/branch-names.ts';
import { StatementError, isBranchNotHere } from '../site-databases/provider.ts';
import { applyToBranch } from '../services/migrations.ts';
import { OPEN_FOR_MS } from '../history/site-history.ts';
import { formatBytes } from '../format-bytes.ts';

/** A claim older than this was a maker that stopped: another caller makes the branch again. */
const MAKING_MS = 5 * 60_000;
/** How long a caller waits for another's making (a function's call would be past its time limit by then)... */
const WAIT_MS = 30_000;
/** ...and how often it looks again meanwhile. */
const LOOK_MS = 200;
/** A branch's last use is written at most this often, per node. */
const TOUCH_MS = 60_000;

export interface BranchRow {
  site_id: string;
  branch: string;
  deployment_id: string | null;
  status: 'MAKING' | 'READY' | 'FAILED';
  node_id: string | null;
  made_from: 'history' | 'copy' | null;
  as_of: string | null;
  bytes: number | string;
  error: string | null;
  maker: string;
  claimed_at: string;
  created_at: string;
  used_at: string;
}

/** A branch as the API shows it. */
export const toBranch = (row: BranchRow) => ({
  branch: row.branch,
  status: row.status,
  madeFrom: row.made_from,
  asOf: row.as_of,
  bytes: Number(row.bytes),
  error: row.error,
  createdAt: row.created_at,
  usedAt: row.used_at,
});

/** What a branch is a copy of: the moment, whether a copy of now will do, and the migrations on top. */
interface Source {
  at: Date;
  orNow: boolean;
  migrations: Array<{ name: string; sql: string }>;
  deploymentId: string | null;
}

/** The branch an instant's preview runs on (and a published deployment's, at its publish). */
export const instantBranch = (at: number): string => `t${String(at).padStart(13, '0')}`;

/**
 * What the branch is made from. A deployment's, only while the deployment is open (uploading, within
 * its day): as of its creation, or a copy of now when the database's history does not reach that far.
 */
async function sourceOf(deps: Deps, siteId: string, branch: string): Promise<Source> {
  if (branch.startsWith('t')) {
    const at = Number(branch.slice(1));
    if (at > deps.now().getTime()) throw new BerthError('invalid_request', 'a branch cannot be of a moment to come');
    return { at: new Date(at), orNow: false, migrations: [], deploymentId: null };
  }
  const row = (await deps
    .db('deployments')
    .where({ id: branch, site_id: siteId })
    .first('id', 'short_id', 'status', 'created_at', 'migrations')) as
    | { id: string; short_id: string; status: string; created_at: string; migrations: string | null }
    | undefined;
  if (!row) throw new BerthError('branch_not_found', 'no deployment of this site has that id');
  if (row.status !== 'UPLOADING' || Date.parse(row.created_at) < deps.now().getTime() - OPEN_FOR_MS)
    throw new BerthError(
      'branch_not_found',
      `deployment ${row.short_id} is no longer open, and its branch of the database ended with it: a published deployment's preview runs on a branch as of its publish`,
    );
  // Restores are to the second: the end of the second it was created in, so no write before it is missed.
  return {
    at: new Date(Math.ceil(Date.parse(row.created_at) / 1000) * 1000),
    orNow: true,
    migrations: row.migrations ? (JSON.parse(row.migrations) as Source['migrations']) : [],
    deploymentId: row.id,
  };
}

const failedOnBranch = (error: string) =>
  new BerthError(
    'branch_failed',
    `the deployment's migrations failed on its preview's branch of the database: ${error}`,
  );

/**
 * The name of the branch `branch` of the site's database (branch-names.ts), made first if it is not
 * yet: the database its preview's functions and the query API's `branch` use. Throws
 * `branch_not_found` for a deployment no longer open, `branch_failed` when its migrations failed,
 * `before_history` for an instant the database's history does not hold.
 */
export async function useBranch(deps: Deps, siteId: string, branch: string): Promise<string> {
  const name = branchName(siteId, branch);
  if (deps.readyBranches.has(name)) {
    await touchBranch(deps, name, siteId, branch);
    return name;
  }
  const source = await sourceOf(deps, siteId, branch);
  const database = (await deps.db('databases').where({ site_id: siteId, status: 'READY' }).first('id', 'node_id')) as
    | { id: string; node_id: string | null }
    | undefined;
  if (!database) throw new BerthError('not_found', 'this site has no database yet');
  const maker = newId();
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const row = (await deps.db('database_branches').where({ site_id: siteId, branch }).first()) as
      | BranchRow
      | undefined;
    if (row?.status === 'READY') {
      deps.readyBranches.remember(name);
      return name;
    }
    if (row?.status === 'FAILED') throw failedOnBranch(row.error ?? '');
    if (await claim(deps, siteId, branch, source, maker, row)) {
      await make(deps, siteId, branch, source, maker, database);
      deps.readyBranches.remember(name);
      return name;
    }
    if (Date.now() > deadline)
      throw new BerthError('database_unavailable', 'the branch of the database is still being made; try again shortly');
    await new Promise((resolve) => setTimeout(resolve, LOOK_MS));
  }
}

/** Takes the making of the branch: there is no row yet, or its maker's claim is stale. */
async function claim(
  deps: Deps,
  siteId: string,
  branch: string,
  source: Source,
  maker: string,
  row: BranchRow | undefined,
): Promise<boolean> {
  const now = timestamp(deps);
  if (!row) {
    await deps
      .db('database_branches')
      .insert({
        site_id: siteId,
        branch,
        deployment_id: source.deploymentId,
        status: 'MAKING',
        bytes: 0,
        maker,
        claimed_at: now,
        created_at: now,
        used_at: now,
      })
      .onConflict(['site_id', 'branch'])
      .ignore();
  } else if (Date.parse(row.claimed_at) < deps.now().getTime() - MAKING_MS) {
    await deps
      .db('database_branches')
      .where({ site_id: siteId, branch, status: 'MAKING', maker: row.maker })
      .update({ maker, claimed_at: now });
  }
  const mine = await deps.db('database_branches').where({ site_id: siteId, branch, maker }).first('status');
  return Boolean(mine);
}

/** Makes the branch (its claim taken): copied, migrated, measured; or recorded as failed, or let go. */
async function make(
  deps: Deps,
  siteId: string,
  branch: string,
  source: Source,
  maker: string,
  database: { id: string; node_id: string | null },
): Promise<void> {
  const name = branchName(siteId, branch);
  const mine = () => deps.db('database_branches').where({ site_id: siteId, branch, maker });
  try {
    await checkRoom(deps, siteId);
    if (!source.orNow) await checkInHistory(deps, siteId, source.at);
    const made = await deps.siteDatabases.makeBranch(name, source.at, source.orNow);
    try {
      // A deployment that carries no migrations leaves the schema as it was.
      if (source.migrations.length > 0) await applyToBranch(deps, name, siteId, database.id, source.migrations);
    } catch (err) {
      if (!(err instanceof BerthError) || !err.code.startsWith('migration_')) throw err;
      // Kept as the failure, not as a half-migrated copy: the preview shows it until the deployment ends.
      await deps.siteDatabases.dropBranch(name);
      await mine().update({ status: 'FAILED', error: err.message, bytes: 0, node_id: database.node_id });
      throw failedOnBranch(err.message);
    }
    await mine().update({
      status: 'READY',
      node_id: database.node_id,
      made_from: made.from,
      as_of: made.asOf,
      bytes: await deps.siteDatabases.size(name),
      used_at: timestamp(deps),
    });
    deps.log.info({ siteId, branch, from: made.from, asOf: made.asOf }, 'made a branch of a site database');
  } catch (err) {
    if (!(err instanceof BerthError && err.code === 'branch_failed')) await mine().where({ status: 'MAKING' }).delete();
    if (err instanceof StatementError) throw new BerthError('database_unavailable', err.message);
    throw err;
  }
}

/** An instant's branch comes from the database's history, which must hold that moment. */
async function checkInHistory(deps: Deps, siteId: string, at: Date): Promise<void> {
  const points = await deps.siteDatabases.restorePoints(siteId);
  if (points.earliest && at >= new Date(points.earliest) && points.latest && at <= new Date(points.latest)) return;
  if (points.latest && at > new Date(points.latest))
    throw new BerthError(
      'database_unavailable',
      'the database’s history does not reach that moment yet; try again in a few seconds',
    );
  throw new BerthError(
    'before_history',
    points.earliest
      ? `the database's history begins at ${points.earliest}: an instant before it has no branch of the database`
      : 'the database has no history to branch from yet',
    { earliest: points.earliest },
  );
}

/**
 * A branch counts against the account's storage: it is made only while the account's files and
 * branches leave room for a copy of the database as big as the database is now.
 */
async function checkRoom(deps: Deps, siteId: string): Promise<void> {
  const { account_id: accountId } = (await deps.db('sites').where({ id: siteId }).first('account_id')) as {
    account_id: string;
  };
  const { usedBytes, limitBytes: limit } = await deps.storageQuota.usage(accountId);
  if (limit === null) return;
  const used = usedBytes + (await branchBytes(deps, accountId));
  const needed = await deps.siteDatabases.size(siteId);
  if (used + needed > limit)
    throw new BerthError(
      'quota_exceeded',
      `this account stores ${formatBytes(used)} of its ${formatBytes(limit)} limit with its previews' branches of databases, and a branch of this database needs ${formatBytes(needed)} more`,
    );
}

/** The bytes the branches of the account's site databases take, as last measured. */
export async function branchBytes(deps: Pick<Deps, 'db'>, accountId: string): Promise<number> {
  const row = (await deps
    .db('database_branches')
    .join('sites', 'sites.id', 'database_branches.site_id')
    .where('sites.account_id', accountId)
    .sum({ bytes: 'database_branches.bytes' })
    .first()) as { bytes: number | string | null } | undefined;
  return Number(row?.bytes ?? 0);
}

/**
 * Runs `work` on the branch, made first if need be; a branch the node holding the database does not
 * have (dropped meanwhile, or made where the database was before a move) is made again once.
 */
export async function onBranch<T>(
  deps: Deps,
  siteId: string,
  branch: string,
  work: (name: string) => Promise<T>,
): Promise<T> {
  const name = await useBranch(deps, siteId, branch);
  try {
    return await work(name);
  } catch (err) {
    if (!isBranchNotHere(err)) throw err;
    deps.readyBranches.forget(name);
    await deps.db('database_branches').where({ site_id: siteId, branch, status: 'READY' }).delete();
    return work(await useBranch(deps, siteId, branch));
  }
}

/** Records a use of the branch (for the sweep of instants' branches), at most once a minute per node. */
async function touchBranch(deps: Deps, name: string, siteId: string, branch: string): Promise<void> {
  if (!deps.readyBranches.due(name, TOUCH_MS)) return;
  await deps
    .db('database_branches')
    .where({ site_id: siteId, branch })
    .update({ used_at: timestamp(deps) });
}

/**
 * Drops the branch: its row first (from then on nothing uses it), then its file on the node that holds
 * the database; every node forgets it. What is left (the metadata or that node not answering) goes with
 * a later sweep (branch-sweep.ts), so the caller's own work stands either way.
 */
export async function dropBranch(deps: Deps, siteId: string, branch: string): Promise<void> {
  try {
    const removed = await deps.db('database_branches').where({ site_id: siteId, branch }).delete();
    if (removed === 0) return;
    await deps.changes.publish({ kind: 'database', siteId });
    await deps.siteDatabases.dropBranch(branchName(siteId, branch));
  } catch (err) {
    logJobFailure(deps.log, err, 'a branch of a site database could not be dropped yet', { siteId, branch });
  }
}

/** The branch of a deployment's preview, if it has one. */
export async function deploymentBranch(deps: Pick<Deps, 'db'>, siteId: string, deploymentId: string) {
  const row = (await deps.db('database_branches').where({ site_id: siteId, branch: deploymentId }).first()) as
    | BranchRow
    | undefined;
  return row ? toBranch(row) : null;
}
