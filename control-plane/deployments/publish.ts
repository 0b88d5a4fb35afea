// Switches a site to a new set of files in one metadata transaction: a deployment published, promoted
// or restored. Every runtime source of the set is checked and compiled first; any failure fails the
// deployment and changes nothing. Then, under the site's row lock, each path's new version becomes
// current (paths whose bytes and type are unchanged keep theirs), removed paths stop being current,
// the functions and cron jobs follow, the bucket's generation is counted, and the deployment is
// numbered into the site's history; the bytes its uploads held are its versions' from then on. Once committed, every node forgets the bucket's cached files and
// retires the changed functions' workers (requests in flight finish on the version they started with).
import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import type { PinnedBlob } from '../../storage/blob-store.ts';
import { writeVersionFiles } from '../../runtime-host/function-files.ts';
import { type SourceProblem, validateFunction } from '../../runtime-host/validate.ts';
import type { HotTx } from '../db/hot-sql.ts';
import { BerthError } from '../errors.ts';
import { type Actor, type Deps, newId, timestamp } from '../deps.ts';
import { insertVersion, makeCurrent } from '../services/files.ts';
import { isBuildInput } from '../builds/build-inputs.ts';
import { recordDeploymentBuilds } from '../builds/build-charges.ts';
import { type BuiltModule, buildEntries } from '../builds/builds.ts';
import { type LockedPackage, lockedPackages } from '../builds/lock-packages.ts';
import {
  chargeSiteBuilds,
  currentFileDigests,
  isRuntimeSource,
  recordFunctionVersion,
  servedVersionId,
} from '../services/functions.ts';
import { lockSite, nextGeneration, nextSeq } from '../history/site-history.ts';
import { isRulesFile, rulesProblems } from '../routing/rules-files.ts';
import type { SiteRow } from '../services/site-rows.ts';
import { chargeVersion, releaseUploads } from '../services/storage-quota.ts';

/** A path's content after the switch. */
export interface TargetFile {
  path: string;
  sha256: string;
  bytes: number;
  contentType: string;
  /** The older version whose bytes these are, for a promote or restore. */
  restoredFrom?: string | null;
}

export interface SiteSwitch {
  /** The deployment row this switch publishes (UPLOADING, or made for a promote or restore). */
  deploymentId: string;
  put: TargetFile[];
  /** Paths whose files stop being current. */
  remove: string[];
}

/** One file's problem, as a failed deployment lists them. */
export interface FileProblem extends SourceProblem {
  path: string;
}

export type SwitchOutcome =
  | { published: true; publishedAt: string; changed: number; files: number; bytes: number }
  | { published: false; problems: FileProblem[]; registryUnavailable?: boolean };

interface ChangedFunction {
  id: string;
  name: string;
  /** The version its workers serve (servedVersionId); null: removed. */
  versionId: string | null;
  /** Its module: the source's text, or a built module's blob. */
  module?: { source: string } | { built: BuiltModule };
}

/** Every file row of the bucket with its current version's bytes: read once, under the site's lock. */
const BUCKET_FILES = `SELECT f.id, f.path, f.current_version_id, v.blob_sha256, v.content_type
  FROM files f LEFT JOIN file_versions v ON v.id = f.current_version_id WHERE f.bucket_id = ?`;

const FILE_AT_PATH = 'SELECT id FROM files WHERE bucket_id = ? AND path = ?';

const FUNCTION_MODULES = 'SELECT path, module_sha256 FROM functions WHERE site_id = ?';

/**
 * The site's modules and build configuration, as held under the site's lock, are what the builds were
 * made from: another change of them since (a file written through the file API) fails the switch, which
 * is then asked for again, rather than serving builds of files the site no longer has.
 */
function assertInputsAsBuilt(held: Map<string, BucketFile>, change: SiteSwitch, built: Map<string, string>): void {
  const putPaths = new Set(change.put.map((f) => f.path));
  const removed = new Set(change.remove);
  const now = new Map(
    [...held.values()]
      .filter((row) => row.blob_sha256 && isBuildInput(row.path) && !putPaths.has(row.path) && !removed.has(row.path))
      .map((row) => [row.path, row.blob_sha256!] as const),
  );
  for (const file of change.put) if (isBuildInput(file.path)) now.set(file.path, file.sha256);
  const same = now.size === built.size && [...now].every(([path, sha256]) => built.get(path) === sha256);
  if (!same)
    throw new BerthError(
      'version_conflict',
      "the site's modules (lib/, deno.json, deno.lock) changed while its functions were built: publish again",
    );
}

interface BucketFile {
  id: string;
  path: string;
  current_version_id: string | null;
  blob_sha256: string | null;
  content_type: string | null;
}

const sha256Of = (bytes: Buffer): string => crypto.createHash('sha256').update(bytes).digest('hex');

/** A runtime source that passed its check: its text, what the check read from it, and its built module. */
interface CheckedSource {
  source: string;
  kind: 'api' | 'cron';
  name: string;
  schedule: string | null;
  module: BuiltModule | null;
}

interface CheckedSet {
  sources: Map<string, CheckedSource>;
  problems: FileProblem[];
  registryUnavailable?: boolean;
  /** The build inputs of the site's files after the switch, which the switch finds as they were read. */
  buildInputs: Map<string, string>;
  /** The deno.lock the builds ended with, stored, where the set had none or one that pins less. */
  lock: PinnedBlob | null;
  /** The packages the set's deno.lock pins after the builds. */
  packages: LockedPackage[];
}

/**
 * Checks every runtime source of the set, and builds those that import, with the functions built
 * before whose modules the switch changes (a file under lib/, deno.json...): the sources, by path,
 * when all pass.
 */
async function checkSources(deps: Deps, site: SiteRow, change: SiteSwitch): Promise<CheckedSet> {
  const sources = new Map<string, CheckedSource>();
  const problems: FileProblem[] = [];
  const after = await currentFileDigests(deps, site.bucket_id);
  for (const path of change.remove) after.delete(path);
  for (const file of change.put) after.set(file.path, file.sha256);
  const buildInputs = new Map([...after].filter(([path]) => isBuildInput(path)));
  const toBuild: string[] = [];
  const checkedPaths = new Set(change.put.filter((f) => isRuntimeSource(f.path)).map((f) => f.path));
  const inputsChanged = change.remove.some(isBuildInput) || change.put.some((f) => isBuildInput(f.path));
  if (inputsChanged)
    for (const path of await builtFunctions(deps, site.id)) if (after.has(path)) checkedPaths.add(path);
  // The site's routing rules (web/_redirects, web/_headers) parse, every line of them.
  for (const file of change.put.filter((f) => isRulesFile(f.path)))
    for (const problem of rulesProblems(file.path, await deps.blobs.read(file.sha256)))
      problems.push({ path: file.path, ...problem });
  for (const path of [...checkedPaths].sort()) {
    const source = (await deps.blobs.read(after.get(path)!)).toString('utf8');
    const checked = validateFunction(path, source);
    if (!checked.ok) {
      problems.push({ path, ...checked.problem });
      continue;
    }
    sources.set(path, {
      source,
      kind: checked.kind,
      name: checked.name,
      schedule: checked.schedule ?? null,
      module: null,
    });
    if (checked.imports) toBuild.push(path);
  }
  const lockOf = async (): Promise<LockedPackage[]> =>
    after.has('deno.lock') ? lockedPackages(await deps.blobs.read(after.get('deno.lock')!)) : [];
  if (problems.length > 0 || toBuild.length === 0)
    return { sources, problems, buildInputs, lock: null, packages: problems.length > 0 ? [] : await lockOf() };
  let outcome = await buildEntries(deps, site.account_id, after, toBuild);
  let lock: PinnedBlob | null = null;
  // A build that pinned more than the set's lock (a package added since) ends with a lock of its own:
  // it goes with the deployment, and every function built from the site's modules is built with it, so
  // the packages the lock lists are those the functions hold.
  if (outcome.ok && outcome.lock && sha256Of(outcome.lock) !== after.get('deno.lock')) {
    lock = await deps.blobs.put(Readable.from([outcome.lock]), outcome.lock.length);
    after.set('deno.lock', lock.sha256);
    buildInputs.set('deno.lock', lock.sha256);
    const built = new Set([...toBuild, ...(await builtFunctions(deps, site.id)).filter((path) => after.has(path))]);
    for (const path of built) {
      if (sources.has(path)) continue;
      const checked = await checkedBuilt(deps, path, after);
      if ('problem' in checked) problems.push(checked.problem);
      else sources.set(path, checked);
    }
    if (problems.length > 0) {
      lock.unpin();
      return { sources, problems, buildInputs, lock: null, packages: [] };
    }
    outcome = await buildEntries(deps, site.account_id, after, [...built].sort());
  }
  if (!outcome.ok) {
    lock?.unpin();
    return {
      sources,
      problems: outcome.problems,
      registryUnavailable: outcome.registryUnavailable,
      buildInputs,
      lock: null,
      packages: [],
    };
  }
  for (const [path, module] of outcome.modules) sources.get(path)!.module = module;
  return { sources, problems, buildInputs, lock, packages: await lockOf() };
}

/** The site's functions served from a built module. */
const builtFunctions = async (deps: Deps, siteId: string): Promise<string[]> =>
  (await deps.db('functions').where({ site_id: siteId }).whereNotNull('module_sha256').pluck('path')) as string[];

/**
 * A function built before, checked again to be built with a new lock: it passed its check then, and a
 * Berth whose rules have changed since says what it finds now.
 */
async function checkedBuilt(
  deps: Deps,
  path: string,
  after: Map<string, string>,
): Promise<CheckedSource | { problem: FileProblem }> {
  const source = (await deps.blobs.read(after.get(path)!)).toString('utf8');
  const checked = validateFunction(path, source);
  if (!checked.ok) return { problem: { path, ...checked.problem } };
  return { source, kind: checked.kind, name: checked.name, schedule: checked.schedule ?? null, module: null };
}

export async function switchSite(
  deps: Deps,
  actor: Actor,
  site: SiteRow,
  change: SiteSwitch,
  /**
   * Runs once every source has passed, before the switch: the deployment's migrations, which commit on
   * their own (the switch that follows may still fail); the names it applied are recorded with it.
   */
  beforeSwitch?: () => Promise<string[]>,
): Promise<SwitchOutcome> {
  const checked = await checkSources(deps, site, change);
  if (checked.problems.length > 0)
    return {
      published: false,
      problems: checked.problems,
      ...(checked.registryUnavailable ? { registryUnavailable: true } : {}),
    };
  // The lock the builds wrote goes with the deployment, so the next one resolves the same versions.
  const { lock } = checked;
  try {
    const put = lock
      ? [
          ...change.put.filter((file) => file.path !== 'deno.lock'),
          { path: 'deno.lock', sha256: lock.sha256, bytes: lock.bytes, contentType: 'application/json' },
        ]
      : change.put;
    return await switchChecked(deps, actor, site, { ...change, put }, checked, beforeSwitch);
  } finally {
    lock?.unpin();
  }
}

async function switchChecked(
  deps: Deps,
  actor: Actor,
  site: SiteRow,
  change: SiteSwitch,
  { sources, buildInputs, packages }: CheckedSet,
  beforeSwitch?: () => Promise<string[]>,
): Promise<SwitchOutcome> {
  const appliedMigrations = beforeSwitch ? JSON.stringify(await beforeSwitch()) : null;
  let now = '';
  const functions: ChangedFunction[] = [];
  const result = await deps.hotSql.write(async (sql) => {
    functions.length = 0;
    await lockSite(sql, site.id);
    // The deployment's row next: its uploads take turns with the switch (see deployments.ts).
    const open = await sql.getForUpdate<{ status: string }>(
      'SELECT status FROM deployments WHERE id = ?',
      change.deploymentId,
    );
    if (open?.status !== 'UPLOADING')
      throw new BerthError('deployment_not_open', 'the deployment was published or cancelled meanwhile');
    // Taken once the site's changes before it have committed: the history's times follow its order.
    now = timestamp(deps);
    // Every writer of the site's files (but data/, which no deployment touches) holds the site's lock
    // first: the rows read here stay as they are until this transaction ends.
    const held = new Map(
      (await sql.all<BucketFile>(BUCKET_FILES, site.bucket_id)).map((row) => [row.path, row] as const),
    );
    assertInputsAsBuilt(held, change, buildInputs);
    const modules = new Map(
      (await sql.all<{ path: string; module_sha256: string | null }>(FUNCTION_MODULES, site.id)).map(
        (row) => [row.path, row.module_sha256] as const,
      ),
    );
    /** Serves `checked` at `path` from `versionId`: a changed source, or a source whose module changed. */
    const record = async (path: string, versionId: string, checked: CheckedSource) => {
      const row = await recordFunctionVersion(
        sql,
        site.id,
        path,
        versionId,
        { ok: true, kind: checked.kind, name: checked.name, schedule: checked.schedule, module: checked.module },
        now,
      );
      functions.push({
        id: row.id,
        name: row.name,
        versionId: servedVersionId(row),
        module: checked.module ? { built: checked.module } : { source: checked.source },
      });
    };
    const moduleChanged = (path: string) => (modules.get(path) ?? null) !== (sources.get(path)?.module?.sha256 ?? null);
    let changed = 0;
    for (const file of change.put) {
      const versionId = await putFile(sql, deps, actor, site, held.get(file.path), file, now);
      if (versionId.changed) changed++;
      await recordEntry(sql, change.deploymentId, file.path, file, versionId.id);
      if (sources.has(file.path) && (versionId.changed || moduleChanged(file.path)))
        await record(file.path, versionId.id, sources.get(file.path)!);
    }
    // Functions whose own files stay as they are, built again from the modules this switch changes.
    const putPaths = new Set(change.put.map((f) => f.path));
    for (const [path, checked] of sources) {
      const current = held.get(path)?.current_version_id;
      if (!putPaths.has(path) && current && moduleChanged(path)) await record(path, current, checked);
    }
    for (const path of change.remove) {
      const { changes } = await sql.run(
        'UPDATE files SET current_version_id = NULL, updated_at = ? WHERE bucket_id = ? AND path = ? AND current_version_id IS NOT NULL',
        now,
        site.bucket_id,
        path,
      );
      if (changes === 0) continue;
      changed++;
      await recordEntry(sql, change.deploymentId, path, null, null);
      const removed = await removeFunction(sql, site, path);
      if (removed) functions.push(removed);
    }
    await nextGeneration(sql, site.bucket_id);
    const files = change.put.length;
    const bytes = change.put.reduce((sum, f) => sum + f.bytes, 0);
    await sql.run(
      "UPDATE deployments SET status = 'PUBLISHED', published_at = ?, seq = ?, file_count = ?, bytes = ?, errors = NULL, applied_migrations = ? WHERE id = ?",
      now,
      await nextSeq(sql, site.id),
      files,
      bytes,
      appliedMigrations,
      change.deploymentId,
    );
    await recordDeploymentBuilds(sql, change.deploymentId, site.id, packages);
    await chargeSiteBuilds(sql, deps.config, site);
    // Its versions hold the bytes now, charged above: the uploads let go of them without a gap.
    await releaseUploads(sql, site.account_id, change.deploymentId);
    return { changed, files, bytes };
  });
  for (const fn of functions) {
    if (!fn.versionId || !fn.module) continue;
    if ('built' in fn.module)
      writeVersionFiles(deps.runtimeDir, fn.id, fn.versionId, await deps.blobs.read(fn.module.built.sha256), 'js');
    else writeVersionFiles(deps.runtimeDir, fn.id, fn.versionId, fn.module.source);
  }
  // Every node forgets the bucket's files at once, then each changed function's workers and modules.
  await deps.changes.publish({ kind: 'bucket', bucketId: site.bucket_id, siteId: site.id });
  for (const fn of functions) {
    await deps.changes.publish({
      kind: 'function',
      siteId: site.id,
      name: fn.name,
      functionId: fn.id,
      versionId: fn.versionId,
    });
  }
  return { published: true, publishedAt: now, ...result };
}

/** Makes `file` current at its path unless it is already; the version that carries it. */
async function putFile(
  sql: HotTx,
  deps: Deps,
  actor: Actor,
  site: SiteRow,
  row: BucketFile | undefined,
  file: TargetFile,
  now: string,
): Promise<{ id: string; changed: boolean }> {
  if (row?.current_version_id && row.blob_sha256 === file.sha256 && row.content_type === file.contentType)
    return { id: row.current_version_id, changed: false };
  let fileId = row?.id;
  // A deleted file's row may go with its last versions (pruned without the site's lock): read it again.
  if (row && row.current_version_id === null)
    fileId = (await sql.getForUpdate<{ id: string }>(FILE_AT_PATH, site.bucket_id, file.path))?.id;
  if (!fileId) {
    fileId = newId();
    await sql.run(
      'INSERT INTO files (id, bucket_id, path, current_version_id, created_at, updated_at) VALUES (?, ?, ?, NULL, ?, ?)',
      fileId,
      site.bucket_id,
      file.path,
      now,
      now,
    );
  }
  const id = await insertVersion(sql, fileId, {
    blob_sha256: file.sha256,
    bytes: file.bytes,
    content_type: file.contentType,
    restored_from_version_id: file.restoredFrom ?? null,
    created_at: now,
  });
  await makeCurrent(sql, fileId, id, now);
  await chargeVersion(sql, deps.config, actor.accountId, file.sha256, file.bytes);
  return { id, changed: true };
}

/** What the deployment did at `path`: the version it made (or kept) current, or a removal. */
async function recordEntry(
  sql: HotTx,
  deploymentId: string,
  path: string,
  file: TargetFile | null,
  versionId: string | null,
): Promise<void> {
  await sql.run(
    `INSERT INTO deployment_files (deployment_id, path, sha256, bytes, content_type, version_id) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (deployment_id, path) DO UPDATE SET sha256 = excluded.sha256, bytes = excluded.bytes, content_type = excluded.content_type, version_id = excluded.version_id`,
    deploymentId,
    path,
    file?.sha256 ?? null,
    file?.bytes ?? 0,
    file?.contentType ?? null,
    versionId,
  );
}

const FUNCTION_AT_PATH = 'SELECT id, name FROM functions WHERE site_id = ? AND path = ?';

/** Stops serving the function at `path`, if there is one. */
async function removeFunction(sql: HotTx, site: SiteRow, path: string): Promise<ChangedFunction | null> {
  if (!isRuntimeSource(path)) return null;
  const existing = await sql.get<{ id: string; name: string }>(FUNCTION_AT_PATH, site.id, path);
  if (!existing) return null;
  await sql.run('DELETE FROM functions WHERE id = ?', existing.id);
  return { id: existing.id, name: existing.name, versionId: null };
}

/**
 * A switch that could not be made fails its deployment with the reason: the account's storage limit,
 * or a migration it carries that failed (and was rolled back).
 */
export function switchRefusal(err: unknown): FileProblem[] | null {
  if (!(err instanceof BerthError)) return null;
  if (err.code === 'quota_exceeded') return [{ path: '', message: err.message, line: 0, column: 0 }];
  if (
    err.code === 'migration_failed' ||
    err.code === 'migration_history_conflict' ||
    err.code === 'database_not_ready'
  ) {
    const name = (err.details?.failedName ?? err.details?.name) as string | null | undefined;
    return [{ path: name ? `migrations/${name}` : 'migrations/', message: err.message, line: 0, column: 0 }];
  }
  return null;
}
