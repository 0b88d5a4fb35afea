// Functions: api/<name>.ts and cron/<name>.ts sources of a site's bucket, deployed when written. A
// deployment validates the source, writes the generated entry and switches the site to the new
// version; a failed deployment records its error and keeps the last good version in service.
import crypto from 'node:crypto';
import { CronExpressionParser } from 'cron-parser';
import { BerthError, conflict, notFound } from '../errors.ts';
import type { FunctionVersion, RuntimeHost } from '../../runtime-host/runtime.ts';
import {
  removeVersions,
  writeVersionFiles,
  writtenModule,
  writtenVersions,
} from '../../runtime-host/function-files.ts';
import type { ChangeListener } from '../db/changes.ts';
import type { HotTx } from '../db/hot-sql.ts';
import { type SourceProblem, functionName, isSharedModule, validateFunction } from '../../runtime-host/validate.ts';
import { isBuildInput } from '../builds/build-inputs.ts';
import { type BuiltModule, buildEntries } from '../builds/builds.ts';
import type { Config } from '../config.ts';
import { type Actor, type Deps, newId, timestamp } from '../deps.ts';
import { findCurrentFile } from './file-rows.ts';
import { lockSite } from '../history/site-history.ts';
import { holdSiteBuilds } from '../builds/build-charges.ts';
import { chargeVersion, releaseVersion } from './storage-quota.ts';
import { type PageRequest, paginate } from './pagination.ts';
import { type SiteRow, requireSite, siteOfBucket } from './site-rows.ts';

export type FunctionStatus = 'ACTIVE' | 'FAILED';

export interface FunctionRow {
  id: string;
  site_id: string;
  path: string;
  name: string;
  kind: 'api' | 'cron';
  schedule: string | null;
  cron_last_scheduled_at: string | null;
  status: FunctionStatus;
  deployed_version_id: string | null;
  deployed_at: string | null;
  attempted_version_id: string;
  last_error: string | null;
  /** The module a build made of the deployed version, for a function that imports; null: its source is its module. */
  module_sha256: string | null;
  created_at: string;
  updated_at: string;
}

export interface FunctionRecord {
  id: string;
  path: string;
  name: string;
  kind: 'api' | 'cron';
  status: FunctionStatus;
  /** cron jobs: the deployed UTC schedule and the next time it fires. */
  schedule: string | null;
  nextRunAt: string | null;
  /** The file version being served, if any version ever deployed. */
  deployedVersionId: string | null;
  deployedAt: string | null;
  /** The newest version a deployment was attempted for. */
  attemptedVersionId: string;
  lastError: SourceProblem | null;
  createdAt: string;
  updatedAt: string;
}

/** The `deployment` object of a write-file response. */
export interface DeploymentOutcome {
  siteId: string;
  sourcePath: string;
  status: 'READY' | 'FAILED';
  functionId?: string;
  error?: SourceProblem;
}

/** The first time `schedule` fires after `after` (UTC). */
export function nextRun(schedule: string, after: Date): Date {
  return CronExpressionParser.parse(schedule, { currentDate: after, tz: 'UTC' }).next().toDate();
}

const toRecord = (deps: Deps, row: FunctionRow): FunctionRecord => ({
  id: row.id,
  path: row.path,
  name: row.name,
  kind: row.kind,
  status: row.status,
  schedule: row.schedule,
  nextRunAt:
    row.kind === 'cron' && row.schedule && row.deployed_version_id
      ? nextRun(row.schedule, deps.now()).toISOString()
      : null,
  deployedVersionId: row.deployed_version_id,
  deployedAt: row.deployed_at,
  attemptedVersionId: row.attempted_version_id,
  lastError: row.last_error ? (JSON.parse(row.last_error) as SourceProblem) : null,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

/**
 * Paths whose writes concern the runtime: .ts files under api/ and cron/ (nested or misnamed ones fail),
 * but the modules among them (named "_…").
 */
export const isRuntimeSource = (path: string): boolean =>
  (path.startsWith('api/') || path.startsWith('cron/')) && path.endsWith('.ts') && !isSharedModule(path);

/**
 * The version a worker serves: the source's file version, and for a built function its module too
 * (a changed module of the site rebuilds a function whose own file did not change).
 */
export const servedVersionId = (row: Pick<FunctionRow, 'deployed_version_id' | 'module_sha256'>): string =>
  row.module_sha256 ? `${row.deployed_version_id}.${row.module_sha256.slice(0, 16)}` : row.deployed_version_id!;

/** The site's current files, path → sha256: what a build of one of its functions reads. */
export async function currentFileDigests(deps: Deps, bucketId: string): Promise<Map<string, string>> {
  const rows = (await deps
    .db('files')
    .join('file_versions', 'file_versions.id', 'files.current_version_id')
    .where('files.bucket_id', bucketId)
    .select('files.path', 'file_versions.blob_sha256')) as Array<{ path: string; blob_sha256: string }>;
  return new Map(rows.map((row) => [row.path, row.blob_sha256]));
}

/**
 * What a built source's check found: its module, with the lock its build ended with where that pins
 * more than the site's deno.lock; or the build's first problem.
 */
async function built(
  deps: Deps,
  site: SiteRow,
  path: string,
): Promise<{ module: BuiltModule; lock: Buffer | null } | { problem: SourceProblem }> {
  const files = await currentFileDigests(deps, site.bucket_id);
  const outcome = await buildEntries(deps, site.account_id, files, [path]);
  if (outcome.ok) {
    const { lock } = outcome;
    const newer = lock && crypto.createHash('sha256').update(lock).digest('hex') !== files.get('deno.lock');
    return { module: outcome.modules.get(path)!, lock: newer ? lock : null };
  }
  const first = outcome.problems[0]!;
  const where = first.path && first.path !== path ? `${first.path}:${first.line}:${first.column}: ` : '';
  return {
    problem: {
      message: `${where}${first.message}`,
      line: first.path === path ? first.line : 0,
      column: first.path === path ? first.column : 0,
    },
  };
}

/**
 * Validates and deploys the current version of `path` for `site`. The function's row is written by
 * recordFunctionVersion under the site's row lock, as a publish writes it (publish.ts), and only if the
 * version checked is still the file's current one: a publish or another write that made a newer one
 * current meanwhile has deployed it (or will), and this deploy starts again from the newer one, so the
 * version served is always the one the files and the history show.
 */
async function deploy(
  deps: Deps,
  site: SiteRow,
  path: string,
): Promise<{ outcome: DeploymentOutcome; row: FunctionRow | null; lock?: Buffer | null }> {
  for (;;) {
    const current = await findCurrentFile(deps, site.bucket_id, path);
    if (!current) throw notFound('function source');
    const named = functionName(path);
    if (!named.ok) {
      // A nested or misnamed file under api/ is stored but is no function: nothing to record.
      return { outcome: { siteId: site.id, sourcePath: path, status: 'FAILED', error: named.problem }, row: null };
    }
    const source = (await deps.blobs.read(current.sha256)).toString('utf8');
    let validation = validateFunction(path, source);
    let module: BuiltModule | null = null;
    let lock: Buffer | null = null;
    if (validation.ok && validation.imports) {
      const made = await built(deps, site, path);
      if ('problem' in made) validation = { ok: false, problem: made.problem };
      else ({ module, lock } = made);
    }
    const checked: CheckedVersion = validation.ok
      ? { ok: true, kind: validation.kind, name: validation.name, schedule: validation.schedule ?? null, module }
      : { ok: false, kind: named.kind, name: named.name, problem: validation.problem };
    const versionId = current.file.currentVersionId;
    const record = (checked: CheckedVersion) =>
      deps.hotSql.write(async (sql) => {
        await lockSite(sql, site.id);
        const now = await sql.get<{ current_version_id: string | null }>(
          'SELECT current_version_id FROM files WHERE bucket_id = ? AND path = ?',
          site.bucket_id,
          path,
        );
        if (now?.current_version_id !== versionId) return null;
        const row = await recordFunctionVersion(sql, site.id, path, versionId, checked, timestamp(deps));
        await chargeSiteBuilds(sql, deps.config, site);
        return row;
      });
    let row: FunctionRow | null;
    try {
      row = await record(checked);
    } catch (err) {
      // A built module the account has no room for: the version fails with why, the last good one stays.
      if (!(err instanceof BerthError && err.code === 'quota_exceeded') || !checked.ok) throw err;
      validation = { ok: false, problem: { message: err.message, line: 0, column: 0 } };
      row = await record({ ok: false, kind: checked.kind, name: checked.name, problem: validation.problem });
    }
    // A newer version became current while this one was checked: that one is what to deploy.
    if (!row) continue;
    if (validation.ok) {
      const served = servedVersionId(row);
      if (module) writeVersionFiles(deps.runtimeDir, row.id, served, await deps.blobs.read(module.sha256), 'js');
      else writeVersionFiles(deps.runtimeDir, row.id, served, source);
      // Every server retires the function's old workers and module files, and forgets its cached version.
      await deps.changes.publish({
        kind: 'function',
        siteId: site.id,
        name: row.name,
        functionId: row.id,
        versionId: served,
      });
    }
    return {
      outcome: validation.ok
        ? { siteId: site.id, sourcePath: path, status: 'READY', functionId: row.id }
        : { siteId: site.id, sourcePath: path, status: 'FAILED', functionId: row.id, error: validation.problem },
      row,
      lock: validation.ok ? lock : null,
    };
  }
}

/** Stops serving the function at `path` and forgets it, unless a version of the path became current meanwhile. */
async function remove(deps: Deps, site: SiteRow, path: string): Promise<void> {
  const row = await deps.hotSql.write(async (sql) => {
    await lockSite(sql, site.id);
    const file = await sql.get<{ current_version_id: string | null }>(
      'SELECT current_version_id FROM files WHERE bucket_id = ? AND path = ?',
      site.bucket_id,
      path,
    );
    if (file?.current_version_id) return undefined;
    const found = await sql.get<FunctionRow>(
      `SELECT ${COLUMNS} FROM functions WHERE site_id = ? AND path = ?`,
      site.id,
      path,
    );
    if (!found) return undefined;
    await sql.run('DELETE FROM functions WHERE id = ?', found.id);
    await chargeSiteBuilds(sql, deps.config, site);
    return found;
  });
  if (!row) return;
  await deps.changes.publish({
    kind: 'function',
    siteId: site.id,
    name: row.name,
    functionId: row.id,
    versionId: null,
  });
}

/**
 * Keeps the runtime in step with a bucket file that was written, restored or deleted: the deployment
 * outcome when the change concerns runtime source of an active site, and the lock a build ended with
 * where it pins more than the site's deno.lock (for the writer to keep, as a publish keeps its lock).
 */
export async function syncRuntimeSource(
  deps: Deps,
  bucketId: string,
  path: string,
): Promise<{ deployment?: DeploymentOutcome; lock?: Buffer }> {
  if (isBuildInput(path)) return rebuildFunctions(deps, bucketId);
  if (!isRuntimeSource(path)) return {};
  const site = await siteOfBucket(deps, bucketId);
  if (!site) return {};
  if (!(await findCurrentFile(deps, bucketId, path))) {
    await remove(deps, site, path);
    return {};
  }
  if (site.status !== 'ACTIVE') return {};
  const { outcome, lock } = await deploy(deps, site, path);
  return { deployment: outcome, ...(lock ? { lock } : {}) };
}

/** A module of the site or its deno.json changed: its built functions are built again from it. */
async function rebuildFunctions(deps: Deps, bucketId: string): Promise<{ lock?: Buffer }> {
  const site = await siteOfBucket(deps, bucketId);
  if (site?.status !== 'ACTIVE') return {};
  const paths = (await deps
    .db('functions')
    .where({ site_id: site.id })
    .whereNotNull('module_sha256')
    .orderBy('path')
    .pluck('path')) as string[];
  let lock: Buffer | undefined;
  for (const path of paths)
    if (await findCurrentFile(deps, bucketId, path)) lock = (await deploy(deps, site, path)).lock ?? lock;
  return lock ? { lock } : {};
}

export async function listFunctions(deps: Deps, actor: Actor, siteId: string, page: PageRequest) {
  await requireSite(deps, actor, siteId);
  const query = deps.db('functions').where({ site_id: siteId }).orderBy('path');
  const { items, pagination } = await paginate(query, page, (row: FunctionRow) => toRecord(deps, row));
  return { functions: items, pagination };
}

/** The deploy endpoint: deploys a stored source; a compile failure is a 422 carrying the record. */
export async function deployFunction(
  deps: Deps,
  actor: Actor,
  siteId: string,
  rawPath: string,
): Promise<{ function: FunctionRecord }> {
  const site = await requireSite(deps, actor, siteId);
  if (site.status !== 'ACTIVE')
    throw conflict('site_not_active', 'an archived site must be activated before its functions can be deployed');
  const path = rawPath.replace(/^\//, '');
  const named = functionName(path);
  if (!named.ok) throw new BerthError('invalid_function_path', named.problem.message);
  const { outcome, row } = await deploy(deps, site, path);
  const record = toRecord(deps, row!);
  if (outcome.status === 'FAILED') {
    throw new BerthError(
      'function_compile_failed',
      `deployment failed: ${outcome.error!.message}`,
      { error: outcome.error },
      { function: record },
    );
  }
  return { function: record };
}

export interface ReconcileReport {
  total: number;
  ready: number;
  failed: Array<{ path: string; error: SourceProblem }>;
}

/** Redeploys every api/*.ts source of an active site. */
export async function reconcileFunctions(deps: Deps, site: SiteRow): Promise<ReconcileReport> {
  const sources = (await deps
    .db('files')
    .where({ bucket_id: site.bucket_id })
    .whereNotNull('current_version_id')
    .andWhere((q) => q.whereRaw("substr(path, 1, 4) = 'api/'").orWhereRaw("substr(path, 1, 5) = 'cron/'"))
    .orderBy('path')
    .select('path')) as Array<{ path: string }>;
  const report: ReconcileReport = { total: 0, ready: 0, failed: [] };
  for (const { path } of sources.filter((s) => isRuntimeSource(s.path))) {
    report.total++;
    const { outcome } = await deploy(deps, site, path);
    if (outcome.status === 'READY') report.ready++;
    else report.failed.push({ path, error: outcome.error! });
  }
  return report;
}

/** A function's served version, ready to run: regenerates its module file if it is gone. */
export async function servedVersion(deps: Deps, row: FunctionRow): Promise<FunctionVersion> {
  const versionId = servedVersionId(row);
  const kind = row.module_sha256 ? 'js' : 'ts';
  let modulePath = writtenModule(deps.runtimeDir, row.id, versionId, kind);
  if (!modulePath) {
    const sha256 =
      row.module_sha256 ??
      ((await deps.db('file_versions').where({ id: row.deployed_version_id }).first('blob_sha256'))
        .blob_sha256 as string);
    modulePath = writeVersionFiles(deps.runtimeDir, row.id, versionId, await deps.blobs.read(sha256), kind).modulePath;
  }
  return { functionId: row.id, versionId, siteId: row.site_id, path: row.path, kind: row.kind, modulePath };
}

/** The function version serving `/api/<name>` on a site, or null. */
export async function resolveEndpoint(deps: Deps, siteId: string, name: string): Promise<FunctionVersion | null> {
  const cached = deps.hostingCache.fn(siteId, name);
  if (cached !== undefined) return cached;
  const generation = deps.hostingCache.generation();
  // The function with its site's bucket generation, in one statement (see HostingCache.observeGeneration).
  const found = (await deps
    .db('sites')
    .leftJoin('bucket_generations', 'bucket_generations.bucket_id', 'sites.bucket_id')
    .leftJoin('functions', (on) =>
      on
        .on('functions.site_id', '=', 'sites.id')
        .andOnVal('functions.name', '=', name)
        .andOnVal('functions.kind', '=', 'api')
        .andOnNotNull('functions.deployed_version_id'),
    )
    .where('sites.id', siteId)
    .first('functions.*', 'sites.bucket_id as bucket_of_site', 'bucket_generations.generation as bucket_generation')) as
    | (FunctionRow & { bucket_of_site: string; bucket_generation: number | string | null })
    | undefined;
  const cacheable =
    !found ||
    found.bucket_generation === null ||
    deps.hostingCache.observeGeneration(found.bucket_of_site, siteId, Number(found.bucket_generation));
  const version = found?.id ? await servedVersion(deps, found) : null;
  if (cacheable) deps.hostingCache.rememberFunction(generation, siteId, name, version);
  return version;
}

/**
 * How long the module files of a replaced version stay: a request that resolved the old version just
 * before the change may still be starting its worker from them.
 */
const REPLACED_MODULES_KEPT_MS = 60_000;

/**
 * The change feed's listener of this node's runtime: a function deployed again or removed, on any node,
 * stops its old workers here (they finish the requests they have) and removes the module files of the
 * versions it replaced: at once for a function removed, a minute later for one deployed again.
 */
export function retiringFunctions(runtime: RuntimeHost, runtimeDir: string): ChangeListener {
  return {
    change(change) {
      if (change.kind !== 'function') return;
      runtime.retire(change.functionId, change.versionId ?? undefined);
      const replaced = writtenVersions(runtimeDir, change.functionId, change.versionId ?? undefined);
      // A function removed is gone at once; a replaced version's files wait for requests that resolved it.
      if (change.versionId === null) removeVersions(runtimeDir, change.functionId, replaced);
      else if (replaced.length > 0)
        setTimeout(() => removeVersions(runtimeDir, change.functionId, replaced), REPLACED_MODULES_KEPT_MS).unref();
    },
    // Workers serve the versions they were started with, which a missed change does not make wrong.
    resync() {},
  };
}

// A function's row as a deployment of one version of its source leaves it: the one writer of the
// `functions` table for both ways a source is deployed, a site's deployment switching many files
// (publish.ts) and a file written or deployed through the file API (deploy above). It runs in the
// caller's write transaction, after the source was checked; the caller writes the version's module
// and publishes the change once that transaction has committed.

/**
 * Counts what the site's builds hold against its account (builds/build-charges.ts): each blob it gains
 * (quota_exceeded past the limit), after giving back each it lost, so that the room freed counts. Call
 * it last before the commit, with the site's lock held.
 */
export async function chargeSiteBuilds(
  sql: HotTx,
  config: Pick<Config, 'accountStorageBytes' | 'deploymentsKept'>,
  site: Pick<SiteRow, 'id' | 'account_id'>,
): Promise<void> {
  const { gained, lost } = await holdSiteBuilds(sql, config, site.id);
  for (const sha256 of lost) await releaseVersion(sql, site.account_id, sha256);
  for (const blob of gained) await chargeVersion(sql, config, site.account_id, blob.sha256, blob.bytes);
}

/** What the check of a version's source found: what it serves, or why it cannot. */
export type CheckedVersion =
  | { ok: true; kind: 'api' | 'cron'; name: string; schedule: string | null; module: BuiltModule | null }
  | { ok: false; kind: 'api' | 'cron'; name: string; problem: SourceProblem };

const COLUMNS =
  'id, site_id, path, name, kind, schedule, cron_last_scheduled_at, status, deployed_version_id, deployed_at, attempted_version_id, last_error, module_sha256, created_at, updated_at';

/**
 * Records the deployment of `versionId` at `path`: a version that passed its check is served from now
 * on (a new cron job starts from now, not catching up on earlier times); one that failed is recorded
 * as attempted with its problem, and the last good version, if any, stays in service.
 */
export async function recordFunctionVersion(
  sql: HotTx,
  siteId: string,
  path: string,
  versionId: string,
  checked: CheckedVersion,
  now: string,
): Promise<FunctionRow> {
  const existing = await sql.get<{ id: string }>(
    'SELECT id FROM functions WHERE site_id = ? AND path = ?',
    siteId,
    path,
  );
  const id = existing?.id ?? newId();
  if (!existing)
    await sql.run(
      `INSERT INTO functions (${COLUMNS})
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      id,
      siteId,
      path,
      checked.name,
      checked.kind,
      checked.ok ? checked.schedule : null,
      checked.ok && checked.kind === 'cron' ? now : null,
      checked.ok ? 'ACTIVE' : 'FAILED',
      checked.ok ? versionId : null,
      checked.ok ? now : null,
      versionId,
      checked.ok ? null : JSON.stringify(checked.problem),
      checked.ok ? (checked.module?.sha256 ?? null) : null,
      now,
      now,
    );
  else if (checked.ok)
    await sql.run(
      `UPDATE functions SET status = 'ACTIVE', schedule = ?, deployed_version_id = ?, deployed_at = ?, attempted_version_id = ?, last_error = NULL, module_sha256 = ?, updated_at = ?,
       cron_last_scheduled_at = COALESCE(cron_last_scheduled_at, ?) WHERE id = ?`,
      checked.schedule,
      versionId,
      now,
      versionId,
      checked.module?.sha256 ?? null,
      now,
      checked.kind === 'cron' ? now : null,
      id,
    );
  else
    await sql.run(
      "UPDATE functions SET status = 'FAILED', attempted_version_id = ?, last_error = ?, updated_at = ? WHERE id = ?",
      versionId,
      JSON.stringify(checked.problem),
      now,
      id,
    );
  return (await sql.get<FunctionRow>(`SELECT ${COLUMNS} FROM functions WHERE id = ?`, id))!;
}

const PREVIEW_FUNCTION = 'preview-';
const WITH_SECRETS = 'secrets-';

/**
 * The function id a site's previews run `api/<name>.ts` under: never a live function's (those are
 * UUIDs), and another for previews given the site's secrets, so that no worker serves both.
 */
export const previewFunctionId = (siteId: string, name: string, secrets = false): string =>
  `${PREVIEW_FUNCTION}${secrets ? WITH_SECRETS : ''}${siteId}-${name}`;

/** Whether a worker of this function may read the site's secrets: a live function, or a preview given them. */
export const mayReadSecrets = (functionId: string): boolean =>
  !functionId.startsWith(PREVIEW_FUNCTION) || functionId.startsWith(`${PREVIEW_FUNCTION}${WITH_SECRETS}`);

/** Whether a function id is a preview's (see previewFunctionId). */
export const isPreviewFunction = (functionId: string): boolean => functionId.startsWith(PREVIEW_FUNCTION);

/** Retires the preview workers of `api/<name>.ts` of the site on every node, given secrets or not. */
export async function forgetPreviewFunction(deps: Deps, siteId: string, path: string): Promise<void> {
  const named = functionName(path);
  if (!named.ok || named.kind !== 'api') return;
  for (const secrets of [false, true])
    await deps.changes.publish({
      kind: 'function',
      siteId,
      name: named.name,
      functionId: previewFunctionId(siteId, named.name, secrets),
      versionId: null,
    });
}
