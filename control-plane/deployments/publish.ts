// Switches a site to a new set of files in one metadata transaction: a deployment published, promoted
// or restored. Every runtime source of the set is checked and compiled first; any failure fails the
// deployment and changes nothing. Then, under the site's row lock, each path's new version becomes
// current (paths whose bytes and type are unchanged keep theirs), removed paths stop being current,
// the functions and cron jobs follow, the bucket's generation is counted, and the deployment is
// numbered into the site's history; the bytes its uploads held are its versions' from then on. Once committed, every node forgets the bucket's cached files and
// retires the changed functions' workers (requests in flight finish on the version they started with).
import { writeVersionFiles } from '../../runtime-host/function-files.ts';
import { type SourceProblem, validateFunction } from '../../runtime-host/validate.ts';
import type { HotTx } from '../db/hot-sql.ts';
import { BerthError } from '../errors.ts';
import { type Actor, type Deps, newId, timestamp } from '../deps.ts';
import { insertVersion, makeCurrent } from '../services/files.ts';
import { isRuntimeSource, recordFunctionVersion } from '../services/functions.ts';
import { lockSite, nextGeneration, nextSeq } from '../history/site-history.ts';
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
  | { published: false; problems: FileProblem[] };

interface ChangedFunction {
  id: string;
  name: string;
  /** null: removed. */
  versionId: string | null;
  source?: string;
}

/** Every file row of the bucket with its current version's bytes: read once, under the site's lock. */
const BUCKET_FILES = `SELECT f.id, f.path, f.current_version_id, v.blob_sha256, v.content_type
  FROM files f LEFT JOIN file_versions v ON v.id = f.current_version_id WHERE f.bucket_id = ?`;

const FILE_AT_PATH = 'SELECT id FROM files WHERE bucket_id = ? AND path = ?';

interface BucketFile {
  id: string;
  path: string;
  current_version_id: string | null;
  blob_sha256: string | null;
  content_type: string | null;
}

/** A runtime source that passed its check: its text, and what the check read from it. */
interface CheckedSource {
  source: string;
  kind: 'api' | 'cron';
  name: string;
  schedule: string | null;
}

/** Checks and compiles every runtime source of the set; the sources, by path, when all pass. */
async function checkSources(
  deps: Deps,
  files: TargetFile[],
): Promise<{ sources: Map<string, CheckedSource>; problems: FileProblem[] }> {
  const sources = new Map<string, CheckedSource>();
  const problems: FileProblem[] = [];
  for (const file of files.filter((f) => isRuntimeSource(f.path))) {
    const source = (await deps.blobs.read(file.sha256)).toString('utf8');
    const checked = validateFunction(file.path, source);
    if (checked.ok)
      sources.set(file.path, { source, kind: checked.kind, name: checked.name, schedule: checked.schedule ?? null });
    else problems.push({ path: file.path, ...checked.problem });
  }
  return { sources, problems };
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
  const { sources, problems } = await checkSources(deps, change.put);
  if (problems.length > 0) return { published: false, problems };
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
    let changed = 0;
    for (const file of change.put) {
      const versionId = await putFile(sql, deps, actor, site, held.get(file.path), file, now);
      if (versionId.changed) changed++;
      await recordEntry(sql, change.deploymentId, file.path, file, versionId.id);
      if (versionId.changed && sources.has(file.path)) {
        const checked = sources.get(file.path)!;
        const row = await recordFunctionVersion(
          sql,
          site.id,
          file.path,
          versionId.id,
          { ok: true, kind: checked.kind, name: checked.name, schedule: checked.schedule },
          now,
        );
        functions.push({ id: row.id, name: row.name, versionId: versionId.id, source: checked.source });
      }
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
    // Its versions hold the bytes now, charged above: the uploads let go of them without a gap.
    await releaseUploads(sql, site.account_id, change.deploymentId);
    return { changed, files, bytes };
  });
  for (const fn of functions) {
    if (fn.versionId && fn.source !== undefined) writeVersionFiles(deps.runtimeDir, fn.id, fn.versionId, fn.source);
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
