// Lookups behind hosted site requests, answered from HostingCache when possible.
import type { Readable } from 'node:stream';
import type { ByteRange } from '../../storage/blob-driver.ts';
import type { CachedSite, CachedWebFile } from './hosting-cache.ts';
import type { Deps } from '../deps.ts';
import { findCurrentFile } from './file-rows.ts';
import type { SiteRow } from './site-rows.ts';

/** The site of a subdomain when the cache knows it (null: no such site), without waiting on anything. */
export const cachedSite = (deps: Deps, subdomain: string): CachedSite | null | undefined =>
  deps.hostingCache.site(subdomain);

/** A bucket file's current version when the cache knows it (null: no such file), without waiting on anything. */
export const cachedWebFile = (deps: Deps, bucketId: string, path: string): CachedWebFile | null | undefined =>
  deps.hostingCache.file(bucketId, path);

export async function resolveSite(deps: Deps, subdomain: string): Promise<CachedSite | null> {
  const cached = cachedSite(deps, subdomain);
  if (cached !== undefined) return cached;
  const generation = deps.hostingCache.generation();
  const row = await deps.db<SiteRow>('sites').where({ subdomain }).first();
  const site = row
    ? { id: row.id, accountId: row.account_id, bucketId: row.bucket_id, access: row.access, status: row.status }
    : null;
  deps.hostingCache.rememberSite(generation, subdomain, site);
  return site;
}

/**
 * A site's file and its bucket's generation, read in one statement: one snapshot of the metadata, so
 * the generation is never older than the file (see HostingCache.observeGeneration).
 */
const WEB_FILE = `SELECT g.generation AS generation, f.current_version_id, f.updated_at, v.bytes, v.content_type, v.blob_sha256
  FROM bucket_generations g
  LEFT JOIN files f ON f.bucket_id = g.bucket_id AND f.path = ?
  LEFT JOIN file_versions v ON v.id = f.current_version_id
  WHERE g.bucket_id = ?`;

interface WebFileRow {
  generation: number | string;
  current_version_id: string | null;
  updated_at: string | null;
  bytes: number | null;
  content_type: string | null;
  blob_sha256: string | null;
}

/** The current version of a site's file by its full path (e.g. "web/index.html"). */
export async function resolveWebFile(deps: Deps, site: CachedSite, path: string): Promise<CachedWebFile | null> {
  const cached = cachedWebFile(deps, site.bucketId, path);
  if (cached !== undefined) return cached;
  const generation = deps.hostingCache.generation();
  const row = await deps.hotSql.get<WebFileRow>(WEB_FILE, path, site.bucketId);
  let file: CachedWebFile | null = null;
  let cacheable = true;
  if (row) {
    cacheable = deps.hostingCache.observeGeneration(site.bucketId, site.id, Number(row.generation));
    if (row.current_version_id && row.blob_sha256)
      file = {
        versionId: row.current_version_id,
        sha256: row.blob_sha256,
        bytes: Number(row.bytes),
        contentType: row.content_type!,
        etag: `"${row.blob_sha256}"`,
        lastModified: new Date(row.updated_at!).toUTCString(),
      };
  } else {
    // A bucket with no generation yet (no site made it since deployments began): the file alone.
    const found = await findCurrentFile(deps, site.bucketId, path);
    if (found)
      file = {
        versionId: found.file.currentVersionId,
        sha256: found.sha256,
        bytes: found.file.bytes,
        contentType: found.file.contentType,
        etag: `"${found.sha256}"`,
        lastModified: new Date(found.file.updatedAt).toUTCString(),
      };
  }
  if (cacheable) deps.hostingCache.rememberFile(generation, site.bucketId, path, file);
  return file;
}

/** A small file's whole body when the blob cache holds it already. */
export const cachedBody = (deps: Deps, file: CachedWebFile): Buffer | undefined => deps.blobs.cached(file.sha256);

/** The whole body of a small file, from the blob cache once read, or null when it should be streamed from the store. */
export async function smallBody(deps: Deps, file: CachedWebFile): Promise<Buffer | null> {
  if (!deps.blobs.cacheable(file.bytes)) return null;
  return deps.blobs.read(file.sha256);
}

/** A short range of a larger file, from the blob cache's blocks, or null when it should be streamed from the store. */
export function rangeBody(deps: Deps, file: CachedWebFile, range: ByteRange): Promise<Buffer | null> {
  return deps.blobs.readRange(file.sha256, file.bytes, range);
}

export function streamBody(deps: Deps, file: CachedWebFile, range?: ByteRange): Promise<Readable> {
  return deps.blobs.stream(file.sha256, range);
}
