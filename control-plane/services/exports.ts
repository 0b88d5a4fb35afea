// Database exports: a SQL dump made in the background into a temp file of the data dir, then kept by
// the blob store (the data dir's exports/ folder, or the object store, where any server can read it),
// fetched through a signed link that needs no API key and expires. An export interrupted by a restart
// ends in ERROR.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { BerthError, conflict, notFound } from '../errors.ts';
import type { Actor, Deps } from '../deps.ts';
import { newId, timestamp } from '../deps.ts';
import { type PageRequest, paginate } from './pagination.ts';
import { safeEqual } from './safe-equal.ts';
import { lockRows } from '../db/locks.ts';
import { leftByThisNode } from '../db/node-work.ts';
import { requireSite } from './site-rows.ts';

const LINK_TTL_MS = 15 * 60_000;

type ExportStatus = 'PROCESSING' | 'COMPLETE' | 'ERROR';

interface ExportRow {
  id: string;
  database_id: string;
  site_id: string;
  status: ExportStatus;
  error: string | null;
  bytes: number | null;
  created_at: string;
  completed_at: string | null;
}

/** Where a dump is written before the store keeps it: beside the local store's exports, swept at start if left. */
const dumpFile = (deps: Deps, id: string) => path.join(deps.config.dataDir, 'exports', `${id}.sql.tmp`);

const signature = (deps: Deps, id: string, expires: number) =>
  crypto.createHmac('sha256', deps.masterKey).update(`export:${id}:${expires}`).digest('base64url');

/**
 * The record as callers see it. A complete export carries a freshly signed download token: the query of
 * a link that needs no key and expires; each front door turns it into a URL of its own address.
 */
function toExport(deps: Deps, row: ExportRow) {
  const record: Record<string, unknown> = {
    id: row.id,
    status: row.status,
    createdAt: row.created_at,
    completedAt: row.completed_at,
    bytes: row.bytes,
    error: row.error,
  };
  if (row.status === 'COMPLETE') {
    const expires = Math.floor((deps.now().getTime() + LINK_TTL_MS) / 1000);
    record.download = {
      token: `expires=${expires}&signature=${signature(deps, row.id, expires)}`,
      expiresAt: new Date(expires * 1000).toISOString(),
    };
  }
  return record;
}

async function requireDatabaseOfSite(deps: Deps, actor: Actor, siteId: string, databaseId: string) {
  await requireSite(deps, actor, siteId);
  const db = await deps.db('databases').where({ id: databaseId, site_id: siteId, status: 'READY' }).first();
  if (!db) throw notFound('database');
}

/** Marks the exports this node's stopped process left PROCESSING as failed, so none stays stuck. */
export async function failInterruptedExports(deps: Deps): Promise<void> {
  await leftByThisNode(deps.db, 'database_exports', deps.nodeId)
    .where({ status: 'PROCESSING' })
    .update({
      status: 'ERROR',
      error: 'interrupted: the server stopped during the export; create a new one',
      completed_at: timestamp(deps),
    });
}

async function produce(deps: Deps, row: ExportRow): Promise<void> {
  const tmp = dumpFile(deps, row.id);
  try {
    fs.mkdirSync(path.dirname(tmp), { recursive: true, mode: 0o700 });
    await deps.siteDatabases.dump(row.site_id, tmp);
    const bytes = await deps.blobs.putExport(row.id, tmp);
    await deps
      .db('database_exports')
      .where({ id: row.id })
      .update({ status: 'COMPLETE', bytes, completed_at: timestamp(deps) });
  } catch (err) {
    deps.log.error({ err, exportId: row.id }, 'database export failed');
    await deps
      .db('database_exports')
      .where({ id: row.id })
      .update({
        status: 'ERROR',
        error: 'the export could not be produced; create a new one',
        completed_at: timestamp(deps),
      })
      .catch(() => {});
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

/** Starts an export (archived sites included); one at a time per database. */
export async function createExport(deps: Deps, actor: Actor, siteId: string, databaseId: string) {
  await requireDatabaseOfSite(deps, actor, siteId, databaseId);
  const now = timestamp(deps);
  const row: ExportRow = {
    id: newId(),
    database_id: databaseId,
    site_id: siteId,
    status: 'PROCESSING',
    error: null,
    bytes: null,
    created_at: now,
    completed_at: null,
  };
  await deps.db.transaction(async (trx) => {
    // Two requests (on any server) take turns here: the second sees the first one's export.
    await lockRows(trx, 'databases', { id: databaseId });
    if (await trx('database_exports').where({ database_id: databaseId, status: 'PROCESSING' }).first('id')) {
      throw conflict(
        'export_in_progress',
        'an export of this database is already running; reconcile it until it is COMPLETE or ERROR',
      );
    }
    await trx('database_exports').insert({ ...row, node_id: deps.nodeId });
  });
  void produce(deps, row);
  return { export: toExport(deps, row) };
}

export async function reconcileExport(deps: Deps, actor: Actor, siteId: string, databaseId: string, exportId: string) {
  await requireSite(deps, actor, siteId);
  const row = await deps
    .db<ExportRow>('database_exports')
    .where({ id: exportId, database_id: databaseId, site_id: siteId })
    .first();
  if (!row) throw notFound('export');
  return { export: toExport(deps, row) };
}

export async function listExports(deps: Deps, actor: Actor, siteId: string, databaseId: string, page: PageRequest) {
  await requireSite(deps, actor, siteId);
  const query = deps
    .db('database_exports')
    .where({ database_id: databaseId, site_id: siteId })
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ]);
  const { items, pagination } = await paginate(query, page, (row: ExportRow) => toExport(deps, row));
  return { exports: items, pagination };
}

/** The dump behind a signed link, checked without an API key. */
export async function openDownload(
  deps: Deps,
  exportId: string,
  expires: string,
  given: string,
): Promise<{ body: Readable; bytes: number }> {
  const expiry = Number(expires);
  const valid = Number.isInteger(expiry) && safeEqual(given, signature(deps, exportId, expiry));
  if (!valid)
    throw new BerthError(
      'invalid_download_link',
      'this download link is not valid; reconcile the export for a new one',
    );
  if (expiry * 1000 < deps.now().getTime())
    throw new BerthError('download_link_expired', 'this download link has expired; reconcile the export for a new one');
  const row = await deps.db<ExportRow>('database_exports').where({ id: exportId, status: 'COMPLETE' }).first();
  const body = row && row.bytes !== null ? await deps.blobs.openExport(exportId) : null;
  if (!row || row.bytes === null || !body) throw new BerthError('not_found', 'export not found');
  return { body, bytes: row.bytes };
}
