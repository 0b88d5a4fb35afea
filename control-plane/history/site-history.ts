// A site's history: every change to its files is a deployment row with, for each path it changed, the
// version it made current or a removal (sha256 null). Published deployments of a site are numbered by
// `seq` under the site's row lock, so its state at any point is the newest entry of each path up to
// it. A write through the file API is recorded here in its own transaction, as a one-file deployment.
import crypto from 'node:crypto';
import type { Knex } from 'knex';
import { isUniqueViolation, logJobFailure } from '../db/errors.ts';
import { type HotTx, statement } from '../db/hot-sql.ts';
import { lockRows } from '../db/locks.ts';
import type { Actor, Deps } from '../deps.ts';

export type DeploymentKind = 'DEPLOY' | 'FILE' | 'PROMOTE' | 'RESTORE' | 'BASELINE';

/** A path's content in a state of the site. */
export interface StateEntry {
  path: string;
  sha256: string;
  bytes: number;
  contentType: string;
  /** The version that carried it. */
  versionId: string;
}

/** An uploading deployment stays open this long; then it expires as FAILED. */
export const OPEN_FOR_MS = 24 * 3600_000;

/** A preview host's first label: 8 characters of [a-z0-9]. */
export const newShortId = (): string => {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  return Array.from(crypto.randomBytes(8), (byte) => alphabet[byte % 36]).join('');
};

/** Who made a change, as the history shows it. */
export const authorOf = (actor: Actor): string =>
  actor.user ? `user:${actor.user.id} (${actor.user.email})` : actor.via === 'cli' ? `cli:${actor.id}` : actor.id;

/** Locks the site's row for the rest of the transaction: changes to one site's files take turns. */
export const lockSite = (sql: HotTx, siteId: string) =>
  sql.getForUpdate<{ id: string }>('SELECT id FROM sites WHERE id = ?', siteId);

/** The next `seq` of the site's published deployments (the site's row is locked). */
export async function nextSeq(sql: HotTx, siteId: string): Promise<number> {
  const row = await sql.get<{ seq: number | string | null }>(
    'SELECT MAX(seq) AS seq FROM deployments WHERE site_id = ?',
    siteId,
  );
  return Number(row?.seq ?? 0) + 1;
}

/** Counts the bucket's generation up, inside a transaction that changes its files' current versions. */
export async function nextGeneration(sql: HotTx, bucketId: string): Promise<void> {
  await sql.run(
    'INSERT INTO bucket_generations (bucket_id, generation) VALUES (?, 1) ON CONFLICT (bucket_id) DO UPDATE SET generation = bucket_generations.generation + 1',
    bucketId,
  );
}

export interface FileChange {
  path: string;
  /** null: the file was deleted. */
  version: { id: string; sha256: string; bytes: number; contentType: string } | null;
}

/**
 * Records one write, delete or restore through the file API as a published one-file deployment, in the
 * transaction that made it: sent with its commit, numbered after the site's last deployment there. The
 * caller holds the site's row lock (lockSite), taken before the file's, so the number is the next one.
 */
export function recordFileChange(
  sql: HotTx,
  deps: Pick<Deps, 'db' | 'log'>,
  siteId: string,
  actor: Actor,
  change: FileChange,
  now: string,
): void {
  // One write in CHECKPOINT_LOOK_EVERY, at random, looks for a checkpoint once it has committed: a site
  // changed only through the file API keeps the entries a rebuild reads bounded too.
  if (Math.random() * CHECKPOINT_LOOK_EVERY < 1)
    sql.afterCommit(() => {
      checkpointHistory(deps, siteId).catch((err: unknown) =>
        logJobFailure(deps.log, err, 'keeping a checkpoint of the site history failed', { siteId }),
      );
    });
  const id = crypto.randomUUID();
  sql.commitWith(
    statement(
      `INSERT INTO deployments (id, site_id, short_id, kind, status, prune, message, author, created_at, published_at, seq, file_count, bytes)
       VALUES (?, ?, ?, 'FILE', 'PUBLISHED', ?, NULL, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM deployments WHERE site_id = ?), 1, ?)`,
      id,
      siteId,
      newShortId(),
      0,
      authorOf(actor),
      now,
      now,
      siteId,
      change.version?.bytes ?? 0,
    ),
    statement(
      'INSERT INTO deployment_files (deployment_id, path, sha256, bytes, content_type, version_id) VALUES (?, ?, ?, ?, ?, ?)',
      id,
      change.path,
      change.version?.sha256 ?? null,
      change.version?.bytes ?? 0,
      change.version?.contentType ?? null,
      change.version?.id ?? null,
    ),
  );
}

/**
 * A checkpoint is kept once this many entries follow the last one (or as many as that checkpoint's
 * files, if more): rebuilding a state then reads one checkpoint and fewer entries than that, whatever
 * the length of the history, and checkpoints take at most about as many rows as the entries do.
 */
export const CHECKPOINT_ENTRIES = 1000;
/** How many file API writes, on average, before one looks for a checkpoint. */
const CHECKPOINT_LOOK_EVERY = 64;

/** A history entry as read: a path and the version it made current, or a removal (sha256 null). */
export interface EntryRow {
  path: string;
  sha256: string | null;
  bytes: number | string;
  content_type: string | null;
  version_id: string | null;
  purged_at?: string | null;
}

/** The newest checkpoint of the site at or before `seq`: its number and its file count. */
async function checkpointAtOrBefore(
  deps: Pick<Deps, 'db'>,
  siteId: string,
  seq: number,
): Promise<{ seq: number; files: number } | null> {
  const row = (await deps
    .db('history_checkpoints')
    .where({ site_id: siteId })
    .andWhere('seq', '<=', seq)
    .orderBy('seq', 'desc')
    .first('seq', 'files')) as { seq: number | string; files: number | string } | undefined;
  return row ? { seq: Number(row.seq), files: Number(row.files) } : null;
}

/**
 * The site's files at the end of published deployment number `seq`: the newest checkpoint at or before
 * it, then every path's newest entry after that up to `seq`. A purged entry leaves its path empty.
 */
export async function stateAtSeq(
  deps: Pick<Deps, 'db'>,
  siteId: string,
  seq: number,
): Promise<Map<string, StateEntry>> {
  const checkpoint = await checkpointAtOrBefore(deps, siteId, seq);
  const state = new Map<string, StateEntry>();
  if (checkpoint) {
    const files = (await deps
      .db('history_checkpoint_files')
      .where({ site_id: siteId, seq: checkpoint.seq })
      .select('path', 'sha256', 'bytes', 'content_type', 'version_id')) as EntryRow[];
    for (const row of files) apply(state, row);
  }
  const rows = (await entriesBetween(deps, siteId, checkpoint?.seq ?? 0, seq)
    .orderBy('d.seq')
    .select('f.path', 'f.sha256', 'f.bytes', 'f.content_type', 'f.version_id', 'f.purged_at')) as EntryRow[];
  for (const row of rows) apply(state, row);
  return state;
}

/** The entries of the site's published deployments numbered after `after`, up to `upTo`. */
const entriesBetween = (deps: Pick<Deps, 'db'>, siteId: string, after: number, upTo: number) =>
  deps
    .db('deployment_files as f')
    .join('deployments as d', 'd.id', 'f.deployment_id')
    .where('d.site_id', siteId)
    .andWhere('d.status', 'PUBLISHED')
    .andWhere('d.seq', '>', after)
    .andWhere('d.seq', '<=', upTo);

function apply(state: Map<string, StateEntry>, row: EntryRow): void {
  if (row.sha256 === null || row.version_id === null || row.purged_at) state.delete(row.path);
  else
    state.set(row.path, {
      path: row.path,
      sha256: row.sha256,
      bytes: Number(row.bytes),
      contentType: row.content_type!,
      versionId: row.version_id,
    });
}

/**
 * Keeps a checkpoint of the site's state at its current `seq` when enough entries followed the last
 * one. Run after a publish commits; a checkpoint is written whole in one transaction or not at all, and
 * one that another node wrote first is left as it is.
 */
export async function checkpointHistory(deps: Pick<Deps, 'db'>, siteId: string): Promise<boolean> {
  const seq = await currentSeq(deps, siteId);
  const last = await checkpointAtOrBefore(deps, siteId, seq);
  if (last?.seq === seq) return false;
  const pending = (await entriesBetween(deps, siteId, last?.seq ?? 0, seq)
    .count({ n: '*' })
    .first()) as { n: number | string };
  if (Number(pending.n) < Math.max(CHECKPOINT_ENTRIES, last?.files ?? 0)) return false;
  const state = await stateAtSeq(deps, siteId, seq);
  const rows = [...state.values()].map((e) => ({
    site_id: siteId,
    seq,
    path: e.path,
    sha256: e.sha256,
    bytes: e.bytes,
    content_type: e.contentType,
    version_id: e.versionId,
  }));
  try {
    await deps.db.transaction(async (trx) => {
      // Under the site's lock, which a purge takes too: a version purged since the state was read is
      // left out, and a purge after this commit finds the checkpoint's rows.
      await lockRows(trx, 'sites', { id: siteId });
      await trx('history_checkpoints').insert({ site_id: siteId, seq, files: state.size });
      for (let i = 0; i < rows.length; i += 500) await trx('history_checkpoint_files').insert(rows.slice(i, i + 500));
      const purged = await trx('history_checkpoint_files')
        .where({ site_id: siteId, seq })
        .whereNotExists(
          trx('file_versions').whereRaw('file_versions.id = history_checkpoint_files.version_id').select(trx.raw('1')),
        )
        .delete();
      if (purged > 0)
        await trx('history_checkpoints')
          .where({ site_id: siteId, seq })
          .update({ files: state.size - purged });
    });
  } catch (err) {
    if (isUniqueViolation(err)) return false;
    throw err;
  }
  return true;
}

/** The `seq` of the site's newest deployment published at or before `at`; 0 when none was. */
export async function seqAt(deps: Pick<Deps, 'db'>, siteId: string, at: string): Promise<number> {
  const row = (await deps
    .db('deployments')
    .where({ site_id: siteId, status: 'PUBLISHED' })
    .andWhere('published_at', '<=', at)
    .max({ seq: 'seq' })
    .first()) as { seq: number | string | null } | undefined;
  return Number(row?.seq ?? 0);
}

/** When the site's history begins: its BASELINE (made from files it had before), else its creation. */
export async function historyStart(deps: Pick<Deps, 'db'>, siteId: string): Promise<string> {
  const baseline = await deps.db('deployments').where({ site_id: siteId, kind: 'BASELINE' }).first('published_at');
  if (baseline) return baseline.published_at as string;
  return (await deps.db('sites').where({ id: siteId }).first('created_at')).created_at as string;
}

/** The site's current published `seq`. */
export async function currentSeq(deps: Pick<Deps, 'db'>, siteId: string): Promise<number> {
  const row = (await deps
    .db('deployments')
    .where({ site_id: siteId, status: 'PUBLISHED' })
    .max({ seq: 'seq' })
    .first()) as { seq: number | string | null } | undefined;
  return Number(row?.seq ?? 0);
}

export interface CurrentFileRow {
  path: string;
  version_id: string;
  sha256: string;
  bytes: number | string;
  content_type: string;
}

/** A bucket's current files but `data/`: what a site's history holds, and what a new state is compared with. */
export async function historyFiles(db: Knex, bucketId: string): Promise<CurrentFileRow[]> {
  return (await db('files')
    .join('file_versions', 'file_versions.id', 'files.current_version_id')
    .where('files.bucket_id', bucketId)
    .andWhereRaw("substr(files.path, 1, 5) <> 'data/'")
    .select(
      'files.path as path',
      'file_versions.id as version_id',
      'file_versions.blob_sha256 as sha256',
      'file_versions.bytes as bytes',
      'file_versions.content_type as content_type',
    )) as CurrentFileRow[];
}

/**
 * Starts a new site's history in the transaction that makes it: its bucket's generation, and when the
 * bucket holds files already, a BASELINE deployment of them (`data/` aside).
 */
export async function startHistory(
  trx: Knex.Transaction,
  site: { id: string; bucket_id: string },
  now: string,
): Promise<void> {
  await trx('bucket_generations').insert({ bucket_id: site.bucket_id, generation: 0 }).onConflict('bucket_id').ignore();
  const files = await historyFiles(trx, site.bucket_id);
  if (files.length === 0) return;
  const id = crypto.randomUUID();
  await trx('deployments').insert({
    id,
    site_id: site.id,
    short_id: newShortId(),
    kind: 'BASELINE',
    status: 'PUBLISHED',
    prune: false,
    message: 'the files the bucket held when the site was made',
    author: 'system',
    created_at: now,
    published_at: now,
    seq: 1,
    file_count: files.length,
    bytes: files.reduce((sum, f) => sum + Number(f.bytes), 0),
  });
  for (let i = 0; i < files.length; i += 500)
    await trx('deployment_files').insert(files.slice(i, i + 500).map((f) => ({ deployment_id: id, ...f })));
}

/**
 * The versions the site's kept deployments hold (the newest `kept` published ones but one-file writes):
 * they cannot be deleted, so each of those deployments can be made current again.
 */
export async function pinnedVersionsQuery(
  sql: Pick<HotTx, 'get'>,
  siteId: string,
  kept: number,
): Promise<{ sql: string; params: Array<string | number> }> {
  return {
    sql: `SELECT df.version_id FROM deployment_files df JOIN deployments d ON d.id = df.deployment_id WHERE ${KEPT_DEPLOYMENTS} AND df.version_id IS NOT NULL`,
    params: [siteId, await oldestKeptSeq(sql, siteId, kept)],
  };
}

/** The kept deployments of a site (alias `d`), given its id and oldestKeptSeq's answer. */
export const KEPT_DEPLOYMENTS = "d.site_id = ? AND d.status = 'PUBLISHED' AND d.kind <> 'FILE' AND d.seq >= ?";

/** The number of the oldest of the site's kept deployments (the newest `kept` published ones but one-file writes). */
export async function oldestKeptSeq(sql: Pick<HotTx, 'get'>, siteId: string, kept: number): Promise<number> {
  const oldest = await sql.get<{ seq: number | string }>(
    "SELECT seq FROM deployments WHERE site_id = ? AND status = 'PUBLISHED' AND kind <> 'FILE' ORDER BY seq DESC LIMIT 1 OFFSET ?",
    siteId,
    kept - 1,
  );
  return Number(oldest?.seq ?? 0);
}
