// Deployments (docs/deployments.md): a set of files declared by digest, the bytes the account does not
// hold uploaded, then published all at once (publish.ts); the site's history of them, with the diff of
// each against the state before it; an earlier deployment made current again (promote), and the site
// put back to any instant of its history (restore), both as new deployments that copy no bytes.
import { type LockedPackage, type PackageChanges, lockedPackages, packageChanges } from '../builds/lock-packages.ts';
import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import { BlobTooLargeError, type PinnedBlob } from '../../storage/blob-store.ts';
import { isUniqueViolation, logJobFailure } from '../db/errors.ts';
import { BerthError, conflict, invalid, notFound } from '../errors.ts';
import { type Actor, type Deps, timestamp } from '../deps.ts';
import { checkContentType } from '../services/files.ts';
import { type PageRequest, paginate } from '../services/pagination.ts';
import { forgetPreviewFunctions } from './previews.ts';
import { deploymentBranch, dropBranch } from '../database-branches/branches.ts';
import { assertWritablePath, normalizeFilePath } from '../services/paths.ts';
import { isPrunedPath } from './pruned-paths.ts';
import { type FileProblem, type TargetFile, switchRefusal, switchSite } from './publish.ts';
import {
  type DeploymentKind,
  type EntryRow,
  type StateEntry,
  authorOf,
  checkpointHistory,
  OPEN_FOR_MS,
  currentSeq,
  historyFiles,
  historyStart,
  newShortId,
  seqAt,
  stateAtSeq,
} from '../history/site-history.ts';
import { type SiteRow, requireSite } from '../services/site-rows.ts';
import { applyMigrations } from '../services/migrations.ts';
import { chargeVersion, releaseUploads } from '../services/storage-quota.ts';
import type { HotTx } from '../db/hot-sql.ts';

/** Files one deployment may declare. */
export const MAX_DEPLOYMENT_FILES = 20_000;
/** UPLOADING deployments one site may have open at once; an open one expires after a day. */
export const MAX_OPEN_DEPLOYMENTS = 5;

type Status = 'UPLOADING' | 'PUBLISHED' | 'FAILED';

interface DeploymentRow {
  id: string;
  site_id: string;
  short_id: string;
  kind: DeploymentKind;
  status: Status;
  prune: boolean | number;
  message: string | null;
  author: string;
  created_at: string;
  published_at: string | null;
  seq: number | string | null;
  source_deployment_id: string | null;
  restored_at: string | null;
  /** A whole restore's database restore: JSON {restoredTo, restoredFrom}. */
  database_restore?: string | null;
  file_count: number | string;
  bytes: number | string;
  errors: string | null;
  migrations: string | null;
  /** JSON names of the site database migrations it applied. */
  applied_migrations: string | null;
  preview_access?: PreviewAccess;
  preview_secrets?: boolean | number;
  purged_files?: number | string;
}

export type PreviewAccess = 'PRIVATE' | 'PUBLIC';

/** A file of a new deployment: by digest and size (its bytes uploaded after), or with its text inline. */
export interface DeclaredFile {
  path: string;
  sha256?: string | undefined;
  size?: number | undefined;
  contentType?: string | undefined;
  /** UTF-8 text stored with the declaration (front doors that carry JSON only, such as MCP). */
  content?: string | undefined;
}

/** Inline text a deployment may carry per file, as MCP's write_file. */
export const MAX_INLINE_BYTES = 256 * 1024;

const previewUrl = (deps: Deps, site: SiteRow, shortId: string) => deps.siteUrl(`${shortId}--${site.subdomain}`);

function toDeployment(deps: Deps, site: SiteRow, row: DeploymentRow, currentSeqOfSite: number) {
  return {
    id: row.id,
    shortId: row.short_id,
    siteId: row.site_id,
    kind: row.kind,
    status: row.status,
    seq: row.seq === null ? null : Number(row.seq),
    current: row.seq !== null && Number(row.seq) === currentSeqOfSite,
    prune: Boolean(row.prune),
    message: row.message,
    author: row.author,
    files: Number(row.file_count),
    bytes: Number(row.bytes),
    createdAt: row.created_at,
    publishedAt: row.published_at,
    sourceDeploymentId: row.source_deployment_id,
    restoredAt: row.restored_at,
    databaseRestore: row.database_restore
      ? (JSON.parse(row.database_restore) as { restoredTo: string; restoredFrom: string })
      : null,
    errors: row.errors ? (JSON.parse(row.errors) as FileProblem[]) : null,
    appliedMigrations: row.applied_migrations ? (JSON.parse(row.applied_migrations) as string[]) : null,
    previewUrl: previewUrl(deps, site, row.short_id),
    previewAccess: row.preview_access ?? 'PRIVATE',
    previewSecrets: Boolean(row.preview_secrets),
    purgedFiles: Number(row.purged_files ?? 0),
  };
}

async function requireDeployment(deps: Deps, siteId: string, id: string): Promise<DeploymentRow> {
  const row = await deps.db<DeploymentRow>('deployments').where({ id, site_id: siteId }).first();
  if (!row) throw notFound('deployment');
  return row;
}

/** The declared set, each path normalised once and each entry checked; a path declared twice is refused. */
function checkFiles(deps: Deps, files: DeclaredFile[]): Array<TargetFile & { inline?: Buffer }> {
  if (files.length === 0) throw invalid('a deployment declares at least one file');
  if (files.length > MAX_DEPLOYMENT_FILES) throw invalid(`a deployment declares at most ${MAX_DEPLOYMENT_FILES} files`);
  const seen = new Set<string>();
  return files.map((file) => {
    const path = normalizeFilePath(file.path);
    assertWritablePath(path);
    if (path.startsWith('data/'))
      throw new BerthError('invalid_path', `${path}: data/ is the functions' own; write it through the file API`);
    if (seen.has(path)) throw invalid(`${path} is declared twice`);
    seen.add(path);
    const contentType = checkContentType(file.contentType);
    if (file.content !== undefined) {
      const bytes = Buffer.from(file.content, 'utf8');
      if (bytes.length > MAX_INLINE_BYTES)
        throw invalid(`${path}: inline content is at most ${MAX_INLINE_BYTES} bytes; upload larger files by digest`);
      const sha256 = crypto.createHash('sha256').update(bytes).digest('hex');
      return { path, sha256, bytes: bytes.length, contentType, inline: bytes };
    }
    if (!file.sha256 || !/^[0-9a-f]{64}$/.test(file.sha256))
      throw invalid(`${path}: sha256 is 64 lowercase hexadecimal digits (or give the file's text as content)`);
    if (file.size === undefined || !Number.isSafeInteger(file.size) || file.size < 0)
      throw invalid(`${path}: size is the file's length in bytes`);
    if (file.size > deps.config.maxFileBytes)
      throw new BerthError('file_too_large', `${path}: files may be at most ${deps.config.maxFileBytes} bytes`, {
        maxBytes: deps.config.maxFileBytes,
      });
    return { path, sha256: file.sha256, bytes: file.size, contentType };
  });
}

/** Digests of the set whose bytes the account holds neither in its files nor as uploads of this deployment. */
async function missingOf(deps: Deps, accountId: string, deploymentId: string, files: TargetFile[]): Promise<string[]> {
  const wanted = [...new Set(files.map((f) => f.sha256))];
  const held = new Set<string>();
  for (let i = 0; i < wanted.length; i += 500) {
    const batch = wanted.slice(i, i + 500);
    const [owned, uploaded] = await Promise.all([
      deps.db('account_blobs').where({ account_id: accountId }).whereIn('blob_sha256', batch).pluck('blob_sha256'),
      deps.db('deployment_uploads').where({ deployment_id: deploymentId }).whereIn('sha256', batch).pluck('sha256'),
    ]);
    for (const sha of [...owned, ...uploaded] as string[]) held.add(sha);
  }
  return wanted.filter((sha) => !held.has(sha));
}

export async function createDeployment(
  deps: Deps,
  actor: Actor,
  siteId: string,
  input: {
    files: DeclaredFile[];
    prune?: boolean | undefined;
    message?: string | undefined;
    migrations?: Array<{ name: string; sql: string }> | undefined;
  },
) {
  const site = await requireSite(deps, actor, siteId);
  const files = checkFiles(deps, input.files);
  const migrations = input.migrations ?? [];
  if (migrations.length > 0) await databaseForMigrations(deps, site.id);
  const now = timestamp(deps);
  // Those past their day are left to the periodic expiry (expireOpenDeployments), which frees their uploads.
  const open = (
    await deps
      .db('deployments')
      .where({ site_id: site.id, status: 'UPLOADING' })
      .andWhere('created_at', '>=', openSince(deps))
      .count({ n: '*' })
  )[0] as { n: number | string };
  if (Number(open.n) >= MAX_OPEN_DEPLOYMENTS)
    throw conflict(
      'too_many_open_deployments',
      `a site has at most ${MAX_OPEN_DEPLOYMENTS} deployments uploading at once; publish one, or wait a day for it to expire`,
    );
  const row: DeploymentRow = {
    id: crypto.randomUUID(),
    site_id: site.id,
    short_id: newShortId(),
    kind: 'DEPLOY',
    status: 'UPLOADING',
    prune: Boolean(input.prune),
    message: input.message?.slice(0, 1000) ?? null,
    author: authorOf(actor),
    created_at: now,
    published_at: null,
    seq: null,
    source_deployment_id: null,
    restored_at: null,
    file_count: files.length,
    bytes: files.reduce((sum, f) => sum + f.bytes, 0),
    errors: null,
    migrations: migrations.length > 0 ? JSON.stringify(migrations) : null,
    applied_migrations: null,
  };
  await deps.db.transaction(async (trx) => {
    await trx('deployments').insert(row);
    for (let i = 0; i < files.length; i += 500) {
      await trx('deployment_files').insert(
        files.slice(i, i + 500).map((f) => ({
          deployment_id: row.id,
          path: f.path,
          sha256: f.sha256,
          bytes: f.bytes,
          content_type: f.contentType,
          version_id: null,
        })),
      );
    }
  });
  await storeInline(deps, actor, row.id, files);
  const missing = await missingOf(deps, actor.accountId, row.id, files);
  return { deployment: { ...toDeployment(deps, site, row, await currentSeq(deps, site.id)), missing } };
}

/** Inline files stored at once, each digest once: each is a write to the store and a transaction. */
const INLINE_AT_ONCE = 8;

async function storeInline(
  deps: Deps,
  actor: Actor,
  deploymentId: string,
  files: Array<TargetFile & { inline?: Buffer }>,
): Promise<void> {
  const inline = [...new Map(files.filter((f) => f.inline).map((f) => [f.sha256, f] as const)).values()];
  const next = async (): Promise<void> => {
    for (let file = inline.pop(); file; file = inline.pop())
      await storeUpload(deps, actor, deploymentId, file.sha256, Readable.from([file.inline!]), file.bytes);
  };
  await Promise.all(Array.from({ length: INLINE_AT_ONCE }, next));
}

/** The creation time before which an UPLOADING deployment has expired. */
const openSince = (deps: Deps): string => new Date(deps.now().getTime() - OPEN_FOR_MS).toISOString();

const UPLOADING_ROW = 'SELECT status FROM deployments WHERE id = ?';

/**
 * Fails a deployment still UPLOADING with `problems`, and gives its uploads' bytes back to the account
 * in the same transaction; false when it was no longer open (published, failed or claimed by another
 * node meanwhile). The conditional update takes the deployment's row first, as its uploads do.
 */
async function failOpen(
  deps: Deps,
  accountId: string,
  deploymentId: string,
  problems: FileProblem[],
): Promise<boolean> {
  return deps.hotSql.write(async (sql) => {
    const { changes } = await sql.run(
      "UPDATE deployments SET status = 'FAILED', errors = ? WHERE id = ? AND status = 'UPLOADING'",
      JSON.stringify(problems),
      deploymentId,
    );
    if (changes === 0) return false;
    await releaseUploads(sql, accountId, deploymentId);
    return true;
  });
}

const EXPIRED: FileProblem = { path: '', message: 'not published within a day', line: 0, column: 0 };
/** Deployments one expiry round reads at once. */
const EXPIRY_BATCH = 100;

/**
 * Open deployments past their day become FAILED, their uploads freed for the sweeper and given back to
 * their accounts; run periodically by every node (DeploymentExpiry below), each claimed by the one whose
 * conditional update gets it. Returns how many this node expired.
 */
export async function expireOpenDeployments(deps: Deps): Promise<number> {
  let expired = 0;
  for (;;) {
    const due = (await deps
      .db('deployments as d')
      .join('sites as s', 's.id', 'd.site_id')
      .where('d.status', 'UPLOADING')
      .andWhere('d.created_at', '<', openSince(deps))
      .orderBy('d.created_at')
      .limit(EXPIRY_BATCH)
      .select('d.id', 'd.site_id', 's.account_id')) as Array<{ id: string; site_id: string; account_id: string }>;
    for (const row of due) {
      if (!(await failOpen(deps, row.account_id, row.id, [EXPIRED]))) continue;
      expired++;
      await forgetPreviewFunctions(deps, row.site_id, [row.id]);
      await dropBranch(deps, row.site_id, row.id);
    }
    if (due.length < EXPIRY_BATCH) return expired;
  }
}

async function requireOpen(deps: Deps, siteId: string, id: string): Promise<DeploymentRow> {
  const row = await requireDeployment(deps, siteId, id);
  if (row.status !== 'UPLOADING')
    throw conflict('deployment_not_open', `deployment ${row.short_id} is ${row.status}: it takes no more uploads`);
  if (Date.parse(row.created_at) < Date.parse(openSince(deps)))
    throw conflict('deployment_not_open', `deployment ${row.short_id} was not published within a day`);
  return row;
}

/** Stores the bytes of one digest of an open deployment, checked against the digest and the size declared. */
export async function uploadDeploymentFile(
  deps: Deps,
  actor: Actor,
  siteId: string,
  deploymentId: string,
  sha256: string,
  body: Readable,
) {
  await requireSite(deps, actor, siteId);
  const deployment = await requireOpen(deps, siteId, deploymentId);
  const declared = await deps.db('deployment_files').where({ deployment_id: deployment.id, sha256 }).first('bytes');
  if (!declared) throw notFound('file with that digest in this deployment');
  await storeUpload(deps, actor, deployment.id, sha256, body, Number(declared.bytes));
  return { uploaded: { sha256, bytes: Number(declared.bytes) } };
}

/** How many times an upload's transaction may wait past the time its blob is kept for, each time asking again. */
const COMMIT_ATTEMPTS = 3;

/**
 * Stores bytes for a deployment, checked against the digest and size declared, and charges them to the
 * account in the transaction that records the upload: the limit holds for the whole deployment, on any
 * node. The deployment's row is taken first, so an upload never commits after the deployment has been
 * published, failed or expired (whose transactions give its uploads back).
 */
async function storeUpload(
  deps: Deps,
  actor: Actor,
  deploymentId: string,
  sha256: string,
  body: Readable,
  size: number,
): Promise<void> {
  const reservation = deps.storageQuota.reserve(actor.accountId);
  let blob: PinnedBlob | undefined;
  try {
    // Bytes the account holds already cost nothing more: only new ones are reserved while they arrive.
    const held = await deps
      .db('account_blobs')
      .where({ account_id: actor.accountId, blob_sha256: sha256 })
      .first('bytes');
    if (!held) await reservation.take(size);
    try {
      blob = await deps.blobs.put(body, size, size);
    } catch (err) {
      if (err instanceof BlobTooLargeError)
        throw new BerthError('digest_mismatch', `the bytes sent are more than the ${size} declared`);
      throw err;
    }
    if (blob.sha256 !== sha256 || blob.bytes !== size)
      throw new BerthError(
        'digest_mismatch',
        `the bytes sent (${blob.bytes} bytes, sha256 ${blob.sha256}) are not the ${size} bytes of sha256 ${sha256} declared`,
      );
    const stored = blob;
    for (let attempt = 1; attempt <= COMMIT_ATTEMPTS; attempt++) {
      // As a file write's commit (files.ts): asked before the transaction, the age checked again in it.
      if (!(await deps.blobs.stillStored(stored)))
        throw new BerthError(
          'storage_unavailable',
          'the bytes were removed before they were recorded; send them again',
        );
      if (await deps.hotSql.write((sql) => recordUpload(sql, deps, actor.accountId, deploymentId, stored))) return;
    }
    throw new BerthError(
      'storage_unavailable',
      'the bytes could not be kept until they were recorded; send them again',
    );
  } finally {
    blob?.unpin();
    reservation.release();
  }
}

/** The upload's row and its charge, once per digest and deployment; false when the blob's age ran out first. */
async function recordUpload(
  sql: HotTx,
  deps: Deps,
  accountId: string,
  deploymentId: string,
  blob: PinnedBlob,
): Promise<boolean> {
  const deployment = await sql.getForUpdate<{ status: string }>(UPLOADING_ROW, deploymentId);
  if (deployment?.status !== 'UPLOADING')
    throw conflict('deployment_not_open', 'the deployment was published, cancelled or expired meanwhile');
  if (!deps.blobs.keeps(blob)) return false;
  const { changes } = await sql.run(
    'INSERT INTO deployment_uploads (deployment_id, sha256, bytes) VALUES (?, ?, ?) ON CONFLICT (deployment_id, sha256) DO NOTHING',
    deploymentId,
    blob.sha256,
    blob.bytes,
  );
  if (changes > 0) await chargeVersion(sql, deps.config, accountId, blob.sha256, blob.bytes);
  return true;
}

async function entriesOf(deps: Deps, deploymentId: string): Promise<EntryRow[]> {
  return deps
    .db('deployment_files')
    .where({ deployment_id: deploymentId })
    .orderBy('path')
    .select('path', 'sha256', 'bytes', 'content_type', 'version_id', 'purged_at');
}

/** The site's current files but `data/`: what prune, promote and restore compare a new state with. */
async function currentFiles(deps: Deps, site: SiteRow): Promise<Map<string, { sha256: string; contentType: string }>> {
  const rows = await historyFiles(deps.db, site.bucket_id);
  return new Map(rows.map((row) => [row.path, { sha256: row.sha256, contentType: row.content_type }]));
}

/**
 * Fails a deployment with its problems; the answer names each. Migrations it applied before its switch
 * failed stay applied: the answer and the record name them, with a code of their own.
 */
async function fail(
  deps: Deps,
  site: SiteRow,
  row: DeploymentRow,
  problems: FileProblem[],
  appliedMigrations: string[] = [],
  registryUnavailable = false,
): Promise<never> {
  const changes = {
    status: 'FAILED' as const,
    errors: JSON.stringify(problems),
    applied_migrations: appliedMigrations.length > 0 ? JSON.stringify(appliedMigrations) : null,
  };
  await failOpen(deps, site.account_id, row.id, problems);
  if (changes.applied_migrations)
    await deps.db('deployments').where({ id: row.id }).update({ applied_migrations: changes.applied_migrations });
  await forgetPreviewFunctions(deps, site.id, [row.id]);
  await dropBranch(deps, site.id, row.id);
  const deployment = toDeployment(deps, site, { ...row, ...changes }, await currentSeq(deps, site.id));
  const first = problems[0]!;
  const listed = `${problems.length} problem${problems.length === 1 ? '' : 's'}, the first ${first.path ? `${first.path}:${first.line}:${first.column}: ` : ''}${first.message}`;
  if (appliedMigrations.length > 0)
    throw new BerthError(
      'deployment_failed_after_migrations',
      `deployment ${row.short_id} failed after its migrations ${appliedMigrations.join(', ')} were applied: the site database's schema changed, its files did not: ${listed}`,
      { errors: problems, appliedMigrations },
      { deployment },
    );
  throw new BerthError(
    registryUnavailable ? 'registry_unavailable' : 'deployment_failed',
    `deployment ${row.short_id} failed and nothing about the site changed: ${listed}`,
    { errors: problems },
    { deployment },
  );
}

/** Another call published or cancelled the deployment after this one applied its migrations. */
async function closedAfterMigrations(
  deps: Deps,
  site: SiteRow,
  row: DeploymentRow,
  appliedMigrations: string[],
): Promise<never> {
  await deps
    .db('deployments')
    .where({ id: row.id })
    .update({ applied_migrations: JSON.stringify(appliedMigrations) });
  const now = await requireDeployment(deps, site.id, row.id);
  const message = 'the deployment was published or cancelled meanwhile';
  throw new BerthError(
    'deployment_failed_after_migrations',
    `${message}, after this call applied its migrations ${appliedMigrations.join(', ')}: the site database's schema changed`,
    { errors: [{ path: '', message, line: 0, column: 0 }], appliedMigrations },
    { deployment: toDeployment(deps, site, now, await currentSeq(deps, site.id)) },
  );
}

/** The site's database, which a deployment that carries migrations needs. */
async function databaseForMigrations(deps: Deps, siteId: string): Promise<string> {
  const database = await deps.db('databases').where({ site_id: siteId }).first('id');
  if (!database)
    throw new BerthError(
      'database_not_ready',
      'the deployment carries migrations but the site has no database: create it first (POST /v0/sites/:siteId/databases)',
    );
  return database.id as string;
}

/** Runs a switch for `row`; a failure of its sources or of the account's limit fails it. */
async function publishRow(
  deps: Deps,
  actor: Actor,
  site: SiteRow,
  row: DeploymentRow,
  put: TargetFile[],
  remove: string[],
) {
  const migrations = row.migrations ? (JSON.parse(row.migrations) as Array<{ name: string; sql: string }>) : [];
  // The migrations commit before the switch, which may still fail: what they applied is kept here.
  let applied: string[] = [];
  const migrate =
    migrations.length > 0
      ? async () => {
          const databaseId = await databaseForMigrations(deps, site.id);
          applied = (await applyMigrations(deps, actor, site.id, databaseId, migrations, 'deployment')).appliedNames;
          return applied;
        }
      : undefined;
  let outcome: Awaited<ReturnType<typeof switchSite>>;
  try {
    outcome = await switchSite(deps, actor, site, { deploymentId: row.id, put, remove }, migrate);
  } catch (err) {
    const refusal = switchRefusal(err);
    if (refusal) return fail(deps, site, row, refusal, applied);
    if (applied.length > 0 && err instanceof BerthError && err.code === 'deployment_not_open')
      return closedAfterMigrations(deps, site, row, applied);
    throw err;
  }
  if (!outcome.published) return fail(deps, site, row, outcome.problems, [], outcome.registryUnavailable);
  await dropBranch(deps, site.id, row.id);
  // The publish stands whatever becomes of its checkpoint: a later one keeps it.
  await checkpointHistory(deps, site.id).catch((err: unknown) =>
    logJobFailure(deps.log, err, 'keeping a checkpoint of the site history failed', { siteId: site.id }),
  );
  return getDeployment(deps, actor, site.id, row.id);
}

export async function publishDeployment(deps: Deps, actor: Actor, siteId: string, deploymentId: string) {
  const site = await requireSite(deps, actor, siteId);
  const row = await requireOpen(deps, siteId, deploymentId);
  const put: TargetFile[] = (await entriesOf(deps, row.id)).map((e) => ({
    path: e.path,
    sha256: e.sha256!,
    bytes: Number(e.bytes),
    contentType: e.content_type!,
  }));
  const missing = await missingOf(deps, actor.accountId, row.id, put);
  if (missing.length > 0)
    throw conflict(
      'deployment_incomplete',
      `${missing.length} of the deployment's files have not been uploaded: PUT /v0/sites/${siteId}/deployments/${row.id}/files/<sha256> each`,
      { missing },
    );
  const inSet = new Set(put.map((f) => f.path));
  const remove = row.prune
    ? [...(await currentFiles(deps, site)).keys()].filter((path) => !inSet.has(path) && isPrunedPath(path))
    : [];
  return publishRow(deps, actor, site, row, put, remove);
}

/**
 * What switching the site's files to `target` puts, each entry's bytes still the account's (no bytes
 * are copied), and the files it has now; `versions_unavailable` when some are gone, before anything changes.
 */
export async function heldState(deps: Deps, site: SiteRow, target: Map<string, StateEntry>) {
  const current = await currentFiles(deps, site);
  const put: TargetFile[] = [];
  const unavailable: string[] = [];
  // The whole state is recorded (so the new deployment pins all its files), unchanged paths included.
  for (const entry of target.values()) {
    const now = current.get(entry.path);
    const unchanged = now?.sha256 === entry.sha256 && now.contentType === entry.contentType;
    // No bytes are copied: the entry's blob must still be the account's (its version may have been deleted).
    const held =
      unchanged ||
      (await deps.db('account_blobs').where({ account_id: site.account_id, blob_sha256: entry.sha256 }).first('bytes'));
    if (!held) {
      unavailable.push(entry.path);
      continue;
    }
    put.push({ ...entry, restoredFrom: entry.versionId });
  }
  if (unavailable.length > 0)
    throw conflict(
      'versions_unavailable',
      `${unavailable.length} file${unavailable.length === 1 ? '' : 's'} of that state no longer have their bytes (their versions were deleted): ${unavailable.slice(0, 10).join(', ')}`,
      { paths: unavailable },
    );
  return { put, current };
}

/** Makes the site's files what `target` says (paths other than `data/`), as a new deployment of `kind`. */
export async function switchToState(
  deps: Deps,
  actor: Actor,
  site: SiteRow,
  target: Map<string, StateEntry>,
  fields: {
    kind: DeploymentKind;
    message: string;
    sourceDeploymentId?: string;
    restoredAt?: string;
    databaseRestore?: { restoredTo: string; restoredFrom: string };
  },
) {
  const { put, current } = await heldState(deps, site, target);
  const remove = [...current.keys()].filter((path) => !target.has(path));
  const row: DeploymentRow = {
    id: crypto.randomUUID(),
    site_id: site.id,
    short_id: newShortId(),
    kind: fields.kind,
    status: 'UPLOADING',
    prune: true,
    message: fields.message,
    author: authorOf(actor),
    created_at: timestamp(deps),
    published_at: null,
    seq: null,
    source_deployment_id: fields.sourceDeploymentId ?? null,
    restored_at: fields.restoredAt ?? null,
    ...(fields.databaseRestore ? { database_restore: JSON.stringify(fields.databaseRestore) } : {}),
    file_count: target.size,
    bytes: [...target.values()].reduce((sum, e) => sum + e.bytes, 0),
    errors: null,
    migrations: null,
    applied_migrations: null,
  };
  try {
    await deps.db('deployments').insert(row);
  } catch (err) {
    if (isUniqueViolation(err)) return switchToState(deps, actor, site, target, fields);
    throw err;
  }
  return publishRow(deps, actor, site, row, put, remove);
}

export async function promoteDeployment(deps: Deps, actor: Actor, siteId: string, deploymentId: string) {
  const site = await requireSite(deps, actor, siteId);
  const row = await requireDeployment(deps, siteId, deploymentId);
  if (row.status !== 'PUBLISHED' || row.seq === null)
    throw conflict(
      'deployment_not_open',
      `deployment ${row.short_id} is ${row.status}: only a published one can be made current`,
    );
  const target = await stateAtSeq(deps, site.id, Number(row.seq));
  return switchToState(deps, actor, site, target, {
    kind: 'PROMOTE',
    message: `back to ${row.short_id}`,
    sourceDeploymentId: row.id,
  });
}

function instant(at: string): string {
  const time = Date.parse(at);
  if (!/^\d{4}-\d\d-\d\dT/.test(at) || Number.isNaN(time))
    throw invalid('`at` is an RFC 3339 time, such as 2026-11-26T12:00:00Z');
  return new Date(time).toISOString();
}

/** The site's files at an instant, from its history; refused before the history begins. */
export async function stateAt(deps: Deps, site: SiteRow, at: string) {
  const time = instant(at);
  const start = await historyStart(deps, site.id);
  if (time < start)
    throw new BerthError(
      'before_history',
      `the site's history begins at ${start}: its files before that are not known`,
      { availableFrom: start },
    );
  const seq = await seqAt(deps, site.id, time);
  return { at: time, seq, availableFrom: start, state: await stateAtSeq(deps, site.id, seq) };
}

export async function siteSnapshot(deps: Deps, actor: Actor, siteId: string, at: string, page: PageRequest) {
  const site = await requireSite(deps, actor, siteId);
  const { at: time, availableFrom, state } = await stateAt(deps, site, at);
  // The instant's own preview host, to the millisecond: what restoring to it would serve.
  const previewUrl = deps.siteUrl(`t${String(Date.parse(time)).padStart(13, '0')}--${site.subdomain}`);
  const files = [...state.values()].sort((a, b) => (a.path < b.path ? -1 : 1));
  const items = files.slice(page.offset, page.offset + page.limit);
  const hasMore = page.offset + page.limit < files.length;
  return {
    snapshot: {
      at: time,
      availableFrom,
      files: files.length,
      bytes: files.reduce((sum, f) => sum + f.bytes, 0),
      previewUrl,
    },
    files: items,
    pagination: { hasMore, nextOffset: hasMore ? page.offset + page.limit : null },
  };
}

export async function restoreSite(deps: Deps, actor: Actor, siteId: string, at: string) {
  const site = await requireSite(deps, actor, siteId);
  const { at: time, state } = await stateAt(deps, site, at);
  return switchToState(deps, actor, site, state, { kind: 'RESTORE', message: `back to ${time}`, restoredAt: time });
}

export async function listDeployments(
  deps: Deps,
  actor: Actor,
  siteId: string,
  page: PageRequest,
  filter: { kinds?: DeploymentKind[] | undefined } = {},
) {
  const site = await requireSite(deps, actor, siteId);
  const current = await currentSeq(deps, site.id);
  const query = deps.db('deployments').where({ site_id: site.id }).orderBy('created_at', 'desc').orderBy('id');
  if (filter.kinds?.length) query.whereIn('kind', filter.kinds);
  const { items, pagination } = await paginate(query, page, (row: DeploymentRow) =>
    toDeployment(deps, site, row, current),
  );
  return { deployments: items, pagination };
}

interface Diff {
  added: string[];
  changed: string[];
  removed: string[];
  packages: PackageChanges;
}

/** The npm packages the site's deno.lock pins, with the lock's digest (null: none). */
async function packagesOf(deps: Deps, lockSha256: string | null | undefined): Promise<LockedPackage[]> {
  return lockSha256 ? lockedPackages(await deps.blobs.read(lockSha256)) : [];
}

/**
 * What the deployment changes against the state before it (an open one: against the site now), its
 * files and the npm packages its deno.lock pins; and those packages.
 */
async function diffOf(
  deps: Deps,
  site: SiteRow,
  row: DeploymentRow,
  entries: EntryRow[],
): Promise<{ diff: Diff; packages: LockedPackage[] }> {
  const before: Map<string, { sha256: string; contentType: string }> =
    row.seq === null ? await currentFiles(deps, site) : await stateAtSeq(deps, site.id, Number(row.seq) - 1);
  const lockEntry = entries.find((entry) => entry.path === 'deno.lock');
  const lockBefore = before.get('deno.lock')?.sha256;
  const prunesLock = row.seq === null && Boolean(row.prune) && !lockEntry;
  const lockAfter = lockEntry ? lockEntry.sha256 : prunesLock ? null : lockBefore;
  const packagesBefore = await packagesOf(deps, lockBefore);
  const packages = lockAfter === lockBefore ? packagesBefore : await packagesOf(deps, lockAfter);
  const diff: Diff = { added: [], changed: [], removed: [], packages: packageChanges(packagesBefore, packages) };
  const seen = new Set<string>();
  for (const entry of entries) {
    seen.add(entry.path);
    const was = before.get(entry.path);
    if (entry.sha256 === null) {
      if (was) diff.removed.push(entry.path);
    } else if (!was) diff.added.push(entry.path);
    else if (was.sha256 !== entry.sha256 || was.contentType !== entry.content_type) diff.changed.push(entry.path);
  }
  // An open deployment that prunes removes what its set lacks.
  if (row.seq === null && row.prune)
    for (const path of before.keys()) if (!seen.has(path) && isPrunedPath(path)) diff.removed.push(path);
  return { diff, packages };
}

export async function getDeployment(deps: Deps, actor: Actor, siteId: string, deploymentId: string) {
  const site = await requireSite(deps, actor, siteId);
  const row = await requireDeployment(deps, siteId, deploymentId);
  const entries = await entriesOf(deps, row.id);
  const deployment = toDeployment(deps, site, row, await currentSeq(deps, site.id));
  const { diff, packages } = await diffOf(deps, site, row, entries);
  const missing =
    row.status === 'UPLOADING'
      ? await missingOf(
          deps,
          actor.accountId,
          row.id,
          entries.map((e) => ({
            path: e.path,
            sha256: e.sha256!,
            bytes: Number(e.bytes),
            contentType: e.content_type!,
          })),
        )
      : [];
  return {
    deployment: {
      ...deployment,
      missing,
      databaseBranch: await deploymentBranch(deps, site.id, row.id),
      fileList: entries.map((e) => ({
        path: e.path,
        sha256: e.sha256,
        bytes: Number(e.bytes),
        contentType: e.content_type,
        versionId: e.version_id,
        purged: Boolean(e.purged_at),
      })),
      packages,
      diff,
    },
  };
}

/**
 * Who a deployment's preview host answers and whether its functions get the site's secrets. Every node
 * forgets what it held of the deployment, so the next request is answered by the new rule.
 */
export async function updateDeployment(
  deps: Deps,
  actor: Actor,
  siteId: string,
  deploymentId: string,
  changes: { previewAccess?: PreviewAccess | undefined; previewSecrets?: boolean | undefined },
) {
  await requireSite(deps, actor, siteId);
  const row = await requireDeployment(deps, siteId, deploymentId);
  await deps
    .db('deployments')
    .where({ id: row.id })
    .update({
      ...(changes.previewAccess !== undefined ? { preview_access: changes.previewAccess } : {}),
      ...(changes.previewSecrets !== undefined ? { preview_secrets: changes.previewSecrets } : {}),
    });
  await deps.changes.publish({ kind: 'history', siteId });
  if (changes.previewSecrets !== undefined) await forgetPreviewFunctions(deps, siteId, [row.id]);
  return getDeployment(deps, actor, siteId, deploymentId);
}

/** Gives up a deployment still uploading: it is FAILED, and the bytes sent for it no longer kept for it. */
export async function cancelDeployment(deps: Deps, actor: Actor, siteId: string, deploymentId: string) {
  await requireSite(deps, actor, siteId);
  const row = await requireOpen(deps, siteId, deploymentId);
  const cancelled = await failOpen(deps, actor.accountId, row.id, [
    { path: '', message: 'cancelled before it was published', line: 0, column: 0 },
  ]);
  if (!cancelled) throw conflict('deployment_not_open', `deployment ${row.short_id} was published or failed meanwhile`);
  await dropBranch(deps, siteId, row.id);
  return getDeployment(deps, actor, siteId, deploymentId);
}

/**
 * The periodic expiry of deployments left UPLOADING past their day (expireOpenDeployments): every node
 * runs it, and each due deployment is expired by one of them. A deployment's uploads are charged to its
 * account, so they are given back on time whether or not anyone touches the site again.
 */
export class DeploymentExpiry {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;

  constructor(private readonly deps: Deps) {}

  start(): void {
    this.#timer = setInterval(() => {
      // One round at a time: a slow metadata never stacks rounds up.
      this.#running ??= this.#round().finally(() => {
        this.#running = undefined;
      });
    }, this.deps.config.deploymentExpiryCheckMs);
    this.#timer.unref();
  }

  async #round(): Promise<void> {
    try {
      const expired = await expireOpenDeployments(this.deps);
      if (expired > 0) this.deps.log.info({ deployments: expired }, 'expired deployments not published within a day');
    } catch (err) {
      logJobFailure(this.deps.log, err, 'expiring deployments not published within a day failed');
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#running;
  }
}
