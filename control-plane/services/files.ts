// Versioned files in buckets. Bytes go to the blob store first; the metadata row that makes them the
// current version is committed afterwards in one transaction, so a failed or interrupted write leaves
// at most an unreferenced blob, never a version without its bytes.
import { Readable } from 'node:stream';
import { BerthError, conflict, notFound } from '../errors.ts';
import { BlobTooLargeError, type PinnedBlob } from '../../storage/blob-store.ts';
import { type HotTx, type Statement, lockingStatement, statement } from '../db/hot-sql.ts';
import { requireBucket, requireBucketForWrite } from './buckets.ts';
import { type Actor, type Deps, newId, timestamp } from '../deps.ts';
import {
  FILE_COLUMNS,
  type FileRow,
  type StoredFile,
  VERSION_COLUMNS,
  type VersionRow,
  currentFiles,
  findCurrentFile,
  toFile,
} from './file-rows.ts';
import { type DeploymentOutcome, forgetPreviewFunction, syncRuntimeSource } from './functions.ts';
import { isRulesFile, rulesProblems } from '../routing/rules-files.ts';
import { type PageRequest, paginate } from './pagination.ts';
import { assertWritablePath, normalizeFilePath, normalizePrefix } from './paths.ts';
import { type Reservation, chargeStatements, chargeVersion, checkCharge, releaseVersion } from './storage-quota.ts';
import { lockSite, pinnedVersionsQuery, recordFileChange } from '../history/site-history.ts';
import { siteOfBucket } from './site-rows.ts';

export const DEFAULT_CONTENT_TYPE = 'application/octet-stream';
const CONTENT_TYPE_PATTERN = /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+(?:\s*;\s*[^\u0000-\u001f\u007f]*)?$/i;

export interface FileVersion {
  id: string;
  bytes: number;
  contentType: string;
  createdAt: string;
  restoredFromVersionId: string | null;
}

const toVersion = (row: VersionRow): FileVersion => ({
  id: row.id,
  bytes: row.bytes,
  contentType: row.content_type,
  createdAt: row.created_at,
  restoredFromVersionId: row.restored_from_version_id,
});

export async function listFiles(
  deps: Deps,
  actor: Actor,
  bucketId: string,
  filter: { path?: string | undefined; prefix?: string | undefined },
  page: PageRequest,
) {
  await requireBucket(deps, actor, bucketId);
  const query = currentFiles(deps.db).where('files.bucket_id', bucketId);
  if (filter.path !== undefined) query.andWhere('files.path', normalizeFilePath(filter.path));
  if (filter.prefix !== undefined) {
    const prefix = normalizePrefix(filter.prefix);
    query.andWhereRaw('substr(files.path, 1, ?) = ?', [prefix.length, prefix]);
  }
  query.orderBy('files.path');
  const { items, pagination } = await paginate(query, page, toFile);
  return { files: items, pagination };
}

export async function statFile(deps: Deps, actor: Actor, bucketId: string, rawPath: string): Promise<StoredFile> {
  await requireBucket(deps, actor, bucketId);
  const found = await findCurrentFile(deps, bucketId, normalizeFilePath(rawPath));
  if (!found) throw notFound('file');
  return found;
}

export interface WriteFileInput {
  body: Readable;
  contentType?: string | undefined;
  /** Version the actor expects to be current (If-Match; null: no current version); a mismatch is a conflict. */
  ifMatch?: string | null | undefined;
  /** Content-Length, when the client sent one, to refuse oversized bodies before reading them. */
  declaredBytes?: number | undefined;
}

export interface WriteFileResult {
  id: string;
  fileId: string;
  bucketId: string;
  path: string;
  contentType: string;
  bytes: number;
  versionId: string;
  /** Present when the write changed runtime source of a site: check its status. */
  deployment?: DeploymentOutcome;
}

export function checkContentType(value: string | undefined): string {
  const contentType = value?.trim() || DEFAULT_CONTENT_TYPE;
  if (contentType.length > 255 || !CONTENT_TYPE_PATTERN.test(contentType)) {
    throw new BerthError(
      'invalid_content_type',
      'Content-Type must be a media type such as "text/html; charset=utf-8"',
    );
  }
  return contentType;
}

function assertExpectedVersion(current: string | null, expected: string | null, what: string): void {
  if (current !== expected) {
    throw conflict('version_conflict', `${what} does not match the current version`, { currentVersionId: current });
  }
}

const tooLarge = (limit: number) =>
  new BerthError('file_too_large', `files may be at most ${limit} bytes`, { maxBytes: limit });

export async function writeFile(
  deps: Deps,
  actor: Actor,
  bucketId: string,
  rawPath: string,
  input: WriteFileInput,
): Promise<WriteFileResult> {
  await requireBucketForWrite(deps, actor, bucketId);
  const path = normalizeFilePath(rawPath);
  assertWritablePath(path);
  const contentType = checkContentType(input.contentType);
  const limit = deps.config.maxFileBytes;
  if (input.declaredBytes !== undefined && input.declaredBytes > limit) throw tooLarge(limit);

  // Fail fast on a stale If-Match before reading the body; it is checked again when committing.
  if (input.ifMatch !== undefined) {
    const existing = await deps.hotSql.get<FileRow>(FILE_AT_PATH, bucketId, path);
    assertExpectedVersion(existing?.current_version_id ?? null, input.ifMatch, 'If-Match');
  }

  // Bytes are reserved against the account's quota before they are stored: all of a declared size
  // at once (refused before the body is read), or chunk by chunk as an undeclared one arrives.
  const reservation = deps.storageQuota.reserve(actor.accountId);
  let result: { fileId: string; versionId: string; bytes: number };
  let blob: PinnedBlob | undefined;
  try {
    let body = input.body;
    if (input.declaredBytes !== undefined) await reservation.take(input.declaredBytes);
    else body = Readable.from(reservedAsRead(body, reservation));
    try {
      blob = await deps.blobs.put(body, limit, input.declaredBytes);
    } catch (err) {
      if (err instanceof BlobTooLargeError) throw tooLarge(limit);
      throw err;
    }
    if (isRulesFile(path)) await assertRules(deps, path, blob.sha256);
    result = await commitWrite(deps, actor, bucketId, path, contentType, input.ifMatch, blob);
  } finally {
    blob?.unpin();
    reservation.release();
  }
  return afterWrite(deps, actor, bucketId, path, contentType, result);
}

/** A rules file whose lines do not all parse is refused, each problem at its line and column; nothing is written. */
async function assertRules(deps: Deps, path: string, sha256: string): Promise<void> {
  const problems = rulesProblems(path, await deps.blobs.read(sha256));
  if (problems.length === 0) return;
  const first = problems[0]!;
  throw new BerthError('invalid_routing_rules', `${path}:${first.line}:${first.column}: ${first.message}`, {
    errors: problems.map((problem) => ({ path, ...problem })),
  });
}

/** How many times a write's transaction may wait past the time its blob is kept for, each time asking again. */
const COMMIT_ATTEMPTS = 3;

/** Thrown in a write's transaction that waited past the time its blob is kept for: it rolls back whole. */
class NotKept extends Error {}

/**
 * Commits a stored blob as the file's new version. The store is asked whether the blob is still there
 * before the transaction, never in it: on an object store that may be a request, and the transaction
 * holds the file's row (on SQLite, the one write lock) until it commits. Between the question and the
 * commit the pin keeps this process's sweeper off the blob, and its age other servers': a transaction
 * that waited for its turn past that commits nothing, and the store is asked again.
 *
 * The transaction is two round trips on PostgreSQL: one batch takes its locks and counts the bytes,
 * then the rows that follow from what it found go with the COMMIT, and so does the change's
 * notification, so every other server hears of the write exactly when it commits.
 */
async function commitWrite(
  deps: Deps,
  actor: Actor,
  bucketId: string,
  path: string,
  contentType: string,
  ifMatch: string | null | undefined,
  stored: PinnedBlob,
): Promise<{ fileId: string; versionId: string; bytes: number }> {
  // A site's history records every change of its files but data/, its functions' own data.
  const history = !path.startsWith('data/');
  for (let attempt = 1; attempt <= COMMIT_ATTEMPTS; attempt++) {
    // The sweeper may have removed a blob this write found stored already (see storage/blob-sweeper.ts).
    if (!(await deps.blobs.stillStored(stored)))
      throw new BerthError(
        'storage_unavailable',
        'the stored bytes of this write were removed before it completed; send it again',
      );
    const now = timestamp(deps);
    const committed = await deps.hotSql
      .write(async (sql) => {
        // Locks in the one order every writer takes them. The site's row, if the bucket has a site: its
        // changes take turns (its history is numbered in order). Then the file's row, made if missing (a
        // concurrent first write of the path may make it first: then this one continues it): writers of
        // one path take turns, so If-Match and the version numbers hold under concurrent writes on any
        // backend. Last the blob's and the account's rows, which count the bytes (chargeVersion).
        const found = await sql.batch({
          site: history ? lockingStatement(SITE_OF_BUCKET, bucketId) : undefined,
          file:
            typeof ifMatch === 'string'
              ? lockingStatement(FILE_AT_PATH, bucketId, path)
              : statement(FILE_FOR_WRITE, newId(), bucketId, path, now, now),
          ...chargeStatements(deps.config, actor.accountId, stored.sha256, stored.bytes),
        });
        // Missing only when If-Match names a version, which then fails.
        const file = found.file.rows[0] as FileRow;
        if (ifMatch !== undefined) assertExpectedVersion(file?.current_version_id ?? null, ifMatch, 'If-Match');
        // Waited past the time the blob is kept for: another server's sweeper may remove it before the commit.
        if (!deps.blobs.keeps(stored)) throw new NotKept();
        await checkCharge(sql, deps.config, actor.accountId, stored.bytes, found);
        const versionId = newId();
        sql.commitWith(
          versionStatement(file.id, versionId, {
            blob_sha256: stored.sha256,
            bytes: stored.bytes,
            content_type: contentType,
            restored_from_version_id: null,
            created_at: now,
          }),
          statement(MAKE_CURRENT, versionId, now, file.id),
        );
        const site = found.site.rows[0] as { id: string } | undefined;
        if (site) {
          const version = { id: versionId, sha256: stored.sha256, bytes: stored.bytes, contentType };
          recordFileChange(sql, deps, site.id, actor, { path, version }, timestamp(deps));
        }
        deps.changes.publishWith(sql, { kind: 'file', bucketId, path });
        return { fileId: file.id, versionId, bytes: stored.bytes };
      })
      .catch((err: unknown) => {
        if (err instanceof NotKept) return undefined;
        throw err;
      });
    if (committed) return committed;
  }
  throw new BerthError(
    'storage_unavailable',
    'the stored bytes of this write could not be kept until it committed; send it again',
  );
}

/**
 * Keeps the runtime in step with a file written, restored or deleted (syncRuntimeSource), and keeps the
 * lock a build of it ended with as the site's deno.lock, written by the same actor, as a publish keeps
 * its lock: the next build resolves the same versions. The lock's own write builds the functions again
 * with it and keeps nothing more. Not keeping it fails nothing: the write and its function stand.
 */
async function inStep(
  deps: Deps,
  actor: Actor,
  bucketId: string,
  path: string,
): Promise<DeploymentOutcome | undefined> {
  const { deployment, lock } = await syncRuntimeSource(deps, bucketId, path);
  if (lock && path !== 'deno.lock')
    await writeFile(deps, actor, bucketId, 'deno.lock', {
      body: Readable.from([lock]),
      declaredBytes: lock.length,
      contentType: 'application/json',
    }).catch((err: unknown) =>
      deps.log.warn({ err, bucketId }, 'the lock a build ended with could not be kept as the site’s deno.lock'),
    );
  return deployment;
}

/** What a committed write answers, once hosting and the runtime have caught up with it. */
async function afterWrite(
  deps: Deps,
  actor: Actor,
  bucketId: string,
  path: string,
  contentType: string,
  result: { fileId: string; versionId: string; bytes: number },
): Promise<WriteFileResult> {
  const deployment = await inStep(deps, actor, bucketId, path);
  return {
    id: result.fileId,
    fileId: result.fileId,
    bucketId,
    path,
    contentType,
    bytes: result.bytes,
    versionId: result.versionId,
    ...(deployment ? { deployment } : {}),
  };
}

/**
 * The site whose history records a change of `path`, if any: a site's, for every path but `data/`,
 * which is its functions' own data (ctx.data) and which no rollback puts back.
 */
async function historyOf(deps: Deps, bucketId: string, path: string) {
  return path.startsWith('data/') ? undefined : siteOfBucket(deps, bucketId);
}

const FILE_AT_PATH = `SELECT ${FILE_COLUMNS} FROM files WHERE bucket_id = ? AND path = ?`;

/**
 * The file's row at a path, inserted if missing; an existing one is updated to what it holds, which
 * locks it until the transaction ends as FOR UPDATE would. Either way it answers the row.
 */
const FILE_FOR_WRITE = `INSERT INTO files (id, bucket_id, path, current_version_id, created_at, updated_at) VALUES (?, ?, ?, NULL, ?, ?)
  ON CONFLICT (bucket_id, path) DO UPDATE SET updated_at = files.updated_at RETURNING ${FILE_COLUMNS}`;

const SITE_OF_BUCKET = 'SELECT id FROM sites WHERE bucket_id = ?';

/** A body's chunks as they are read, each reserved against the account's quota before it is passed on. */
async function* reservedAsRead(body: Readable, reservation: Reservation): AsyncGenerator<Buffer> {
  for await (const chunk of body.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    await reservation.take(chunk.length);
    yield chunk;
  }
}

/** The file's next version, numbered after its last in the same statement (the file's row is locked). */
function versionStatement(fileId: string, id: string, fields: Omit<VersionRow, 'id' | 'file_id' | 'seq'>): Statement {
  return statement(
    `INSERT INTO file_versions (id, file_id, blob_sha256, bytes, content_type, restored_from_version_id, created_at, seq)
     VALUES (?, ?, ?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM file_versions WHERE file_id = ?))`,
    id,
    fileId,
    fields.blob_sha256,
    fields.bytes,
    fields.content_type,
    fields.restored_from_version_id,
    fields.created_at,
    fileId,
  );
}

/** Inserts the file's next version (see versionStatement); its id. */
export async function insertVersion(
  sql: HotTx,
  fileId: string,
  fields: Omit<VersionRow, 'id' | 'file_id' | 'seq'>,
): Promise<string> {
  const id = newId();
  const insert = versionStatement(fileId, id, fields);
  await sql.run(insert.sql, ...insert.params);
  return id;
}

const MAKE_CURRENT = 'UPDATE files SET current_version_id = ?, updated_at = ? WHERE id = ?';

export const makeCurrent = (sql: HotTx, fileId: string, versionId: string, now: string) =>
  sql.run(MAKE_CURRENT, versionId, now, fileId);

/** Deletes the file at `path`: it disappears from listings and hosting; its history is kept. */
export async function deleteFile(deps: Deps, actor: Actor, bucketId: string, rawPath: string) {
  await requireBucket(deps, actor, bucketId);
  const path = normalizeFilePath(rawPath);
  const site = await historyOf(deps, bucketId, path);
  const now = timestamp(deps);
  const changed = await deps.hotSql.write(async (sql) => {
    if (site) await lockSite(sql, site.id);
    const { changes } = await sql.run(
      'UPDATE files SET current_version_id = NULL, updated_at = ? WHERE bucket_id = ? AND path = ? AND current_version_id IS NOT NULL',
      now,
      bucketId,
      path,
    );
    if (changes > 0 && site) recordFileChange(sql, deps, site.id, actor, { path, version: null }, timestamp(deps));
    return changes;
  });
  if (changed === 0) throw notFound('file');
  const file = (await deps.db<FileRow>('files').where({ bucket_id: bucketId, path }).first())!;
  await deps.changes.publish({ kind: 'file', bucketId, path });
  await inStep(deps, actor, bucketId, path);
  return { id: file.id, bucketId, path };
}

/** The actor's file by id, including deleted files whose history remains. */
async function requireFileById(deps: Deps, actor: Actor, fileId: string): Promise<FileRow> {
  const row = await deps
    .db<FileRow>('files')
    .join('buckets', 'buckets.id', 'files.bucket_id')
    .where({ 'files.id': fileId, 'buckets.account_id': actor.accountId })
    .first('files.*');
  if (!row) throw notFound('file');
  return row;
}

export async function listVersions(deps: Deps, actor: Actor, fileId: string, page: PageRequest) {
  const file = await requireFileById(deps, actor, fileId);
  const query = deps.db('file_versions').where({ file_id: fileId }).orderBy('seq', 'desc');
  const { items, pagination } = await paginate(query, page, toVersion);
  return { fileId, currentVersionId: file.current_version_id, versions: items, pagination };
}

async function requireVersion(deps: Deps, fileId: string, versionId: string): Promise<VersionRow> {
  const row = await deps.db<VersionRow>('file_versions').where({ id: versionId, file_id: fileId }).first();
  if (!row) throw notFound('version');
  return row;
}

/** A historical version's record and where its exact bytes live. */
export async function getVersion(deps: Deps, actor: Actor, fileId: string, versionId: string) {
  await requireFileById(deps, actor, fileId);
  const row = await requireVersion(deps, fileId, versionId);
  return { version: toVersion(row), sha256: row.blob_sha256 };
}

/**
 * Makes an old version's bytes current again as a new version. `currentVersionId` must name the
 * version that is current now (null for a deleted file), so two editors cannot overwrite each other.
 */
export async function restoreFile(
  deps: Deps,
  actor: Actor,
  fileId: string,
  input: { versionId: string; currentVersionId: string | null },
) {
  const file = await requireFileById(deps, actor, fileId);
  const source = await requireVersion(deps, fileId, input.versionId);
  const now = timestamp(deps);
  const site = await historyOf(deps, file.bucket_id, file.path);
  const versionId = await deps.hotSql.write(async (sql) => {
    if (site) await lockSite(sql, site.id);
    const fresh = await sql.getForUpdate<FileRow>(`SELECT ${FILE_COLUMNS} FROM files WHERE id = ?`, fileId);
    // Its last versions may have been deleted since it was read.
    if (!fresh) throw notFound('file');
    assertExpectedVersion(fresh.current_version_id, input.currentVersionId, 'currentVersionId');
    // The version itself may have been deleted meanwhile: a restore of it would reference nothing.
    if (!(await sql.get('SELECT 1 FROM file_versions WHERE id = ?', source.id))) throw notFound('version');
    const id = await insertVersion(sql, fileId, {
      blob_sha256: source.blob_sha256,
      bytes: source.bytes,
      content_type: source.content_type,
      restored_from_version_id: source.id,
      created_at: now,
    });
    await makeCurrent(sql, fileId, id, now);
    if (site) {
      const version = { id, sha256: source.blob_sha256, bytes: source.bytes, contentType: source.content_type };
      recordFileChange(sql, deps, site.id, actor, { path: file.path, version }, timestamp(deps));
    }
    // The account references the old version's blob already, so a restore never needs quota.
    await chargeVersion(sql, deps.config, actor.accountId, source.blob_sha256, source.bytes);
    return id;
  });
  await deps.changes.publish({ kind: 'file', bucketId: file.bucket_id, path: file.path });
  const deployment = await inStep(deps, actor, file.bucket_id, file.path);
  return {
    fileId,
    versionId,
    restoredFromVersionId: source.id,
    path: file.path,
    ...(deployment ? { deployment } : {}),
  };
}

/** Versions that are the source a function is served from: deleting one would stop the function. */
const DEPLOYED_VERSIONS = 'SELECT deployed_version_id FROM functions WHERE deployed_version_id IS NOT NULL';

/** Deletes `versions` of `file` and uncounts them; a deleted file whose last version goes is gone. */
async function removeVersions(sql: HotTx, accountId: string, file: FileRow, versions: VersionRow[]): Promise<number> {
  let freed = 0;
  for (const version of versions) {
    await sql.run('DELETE FROM file_versions WHERE id = ?', version.id);
    freed += await releaseVersion(sql, accountId, version.blob_sha256);
  }
  if (
    file.current_version_id === null &&
    !(await sql.get('SELECT 1 FROM file_versions WHERE file_id = ? LIMIT 1', file.id))
  ) {
    await sql.run('DELETE FROM files WHERE id = ?', file.id);
  }
  return freed;
}

/**
 * Deletes one version of a file for good; its bytes stop counting against the account's storage once
 * no other version of the account holds the same content. The current version and a version a function
 * is served from stay: they are what the site serves. A version the site's history holds goes too (a
 * purge): the deployments that held it say so, and their previews, instants, promotes and restores no
 * longer have that file.
 */
export async function deleteVersion(deps: Deps, actor: Actor, fileId: string, versionId: string) {
  const owned = await requireFileById(deps, actor, fileId);
  const site = await siteOfBucket(deps, owned.bucket_id);
  const outcome = await deps.hotSql.write(async (sql) => {
    // The site's lock before the file's, as every change to the site's files takes them; a checkpoint
    // of its history takes it too.
    if (site) await lockSite(sql, site.id);
    const file = await sql.getForUpdate<FileRow>(`SELECT ${FILE_COLUMNS} FROM files WHERE id = ?`, fileId);
    const version =
      file &&
      (await sql.get<VersionRow>(
        `SELECT ${VERSION_COLUMNS} FROM file_versions WHERE id = ? AND file_id = ?`,
        versionId,
        fileId,
      ));
    if (!file || !version) throw notFound('version');
    if (file.current_version_id === version.id) {
      throw conflict(
        'version_in_use',
        'this is the file’s current version: write or restore another version, or delete the file, first',
      );
    }
    const deployed = await sql.get<{ path: string }>(
      'SELECT path FROM functions WHERE deployed_version_id = ?',
      version.id,
    );
    if (deployed)
      throw conflict(
        'version_in_use',
        `this version is the source ${deployed.path} is served from; deploy a newer version of it first`,
      );
    const purged = site ? await purgeFromHistory(sql, version.id, timestamp(deps)) : 0;
    return {
      freed: await removeVersions(sql, actor.accountId, file, [version]),
      blob: version.blob_sha256,
      purged,
      path: file.path,
    };
  });
  if (site && outcome.purged > 0) {
    await deps.changes.publish({ kind: 'history', siteId: site.id });
    await forgetPreviewFunction(deps, site.id, outcome.path);
  }
  await releaseBlobs(deps, [outcome.blob]);
  return {
    deleted: true as const,
    fileId,
    versionId,
    freedBytes: outcome.freed,
    purgedFromDeployments: outcome.purged,
  };
}

/**
 * Marks every entry of the site's history that holds the version as purged, counts it on its
 * deployment and takes it out of the history's checkpoints: returns how many deployments held it.
 */
async function purgeFromHistory(sql: HotTx, versionId: string, now: string): Promise<number> {
  const held = await sql.get<{ n: number | string }>(
    'SELECT COUNT(*) AS n FROM deployment_files WHERE version_id = ? AND purged_at IS NULL',
    versionId,
  );
  const count = Number(held?.n ?? 0);
  if (count > 0) {
    await sql.run(
      'UPDATE deployments SET purged_files = purged_files + 1 WHERE id IN (SELECT deployment_id FROM deployment_files WHERE version_id = ? AND purged_at IS NULL)',
      versionId,
    );
    await sql.run(
      'UPDATE deployment_files SET purged_at = ? WHERE version_id = ? AND purged_at IS NULL',
      now,
      versionId,
    );
  }
  await sql.run(
    'UPDATE history_checkpoints SET files = files - 1 WHERE EXISTS (SELECT 1 FROM history_checkpoint_files c WHERE c.site_id = history_checkpoints.site_id AND c.seq = history_checkpoints.seq AND c.version_id = ?)',
    versionId,
  );
  await sql.run('DELETE FROM history_checkpoint_files WHERE version_id = ?', versionId);
  return count;
}

/**
 * Deletes every version of a file but its current one (none, for a deleted file) and any a function is
 * served from: what frees the space of a file's history.
 */
export async function pruneVersions(deps: Deps, actor: Actor, fileId: string) {
  const owned = await requireFileById(deps, actor, fileId);
  const site = await siteOfBucket(deps, owned.bucket_id);
  const outcome = await deps.hotSql.write(async (sql) => {
    const file = await sql.getForUpdate<FileRow>(`SELECT ${FILE_COLUMNS} FROM files WHERE id = ?`, fileId);
    if (!file) throw notFound('file');
    // Versions kept deployments hold stay, as the current one and the functions' sources do.
    const pinned = site
      ? await pinnedVersionsQuery(sql, site.id, deps.config.deploymentsKept)
      : { sql: 'SELECT NULL AS version_id', params: [] };
    const versions = await sql.all<VersionRow>(
      `SELECT ${VERSION_COLUMNS} FROM file_versions WHERE file_id = ? AND id IS DISTINCT FROM ? AND id NOT IN (${DEPLOYED_VERSIONS}) AND id NOT IN (SELECT version_id FROM (${pinned.sql}) p WHERE version_id IS NOT NULL)`,
      fileId,
      file.current_version_id,
      ...pinned.params,
    );
    const freedBytes = await removeVersions(sql, actor.accountId, file, versions);
    return {
      result: { fileId, deletedVersions: versions.length, freedBytes },
      blobs: versions.map((v) => v.blob_sha256),
    };
  });
  await releaseBlobs(deps, outcome.blobs);
  return outcome.result;
}

/** Blobs of deleted versions start their time to the sweeper now, not when they were written. */
async function releaseBlobs(deps: Deps, blobs: string[]): Promise<void> {
  for (const sha256 of new Set(blobs)) await deps.blobs.touch(sha256);
}
