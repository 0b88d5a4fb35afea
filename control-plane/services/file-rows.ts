// How file rows are read: shared by the file API, hosting lookups and function deployment.
import type { Deps } from '../deps.ts';

export interface FileRow {
  id: string;
  bucket_id: string;
  path: string;
  current_version_id: string | null;
  created_at: string;
  updated_at: string;
}

/** FileRow's and VersionRow's columns, for statements that name them (hot statements never select *). */
export const FILE_COLUMNS = 'id, bucket_id, path, current_version_id, created_at, updated_at';
export const VERSION_COLUMNS =
  'id, file_id, seq, blob_sha256, bytes, content_type, restored_from_version_id, created_at';

export interface VersionRow {
  id: string;
  file_id: string;
  seq: number;
  blob_sha256: string;
  bytes: number;
  content_type: string;
  restored_from_version_id: string | null;
  created_at: string;
}

/** A file joined with its current version, as listings and reads need it. */
export interface CurrentFileRow extends FileRow {
  bytes: number;
  content_type: string;
  blob_sha256: string;
  version_created_at: string;
}

export interface FileRecord {
  id: string;
  bucketId: string;
  path: string;
  contentType: string;
  bytes: number;
  currentVersionId: string;
  createdAt: string;
  updatedAt: string;
}

/** What a read needs: the record plus where its bytes live. */
export interface StoredFile {
  file: FileRecord;
  sha256: string;
}

export const toFile = (row: CurrentFileRow): FileRecord => ({
  id: row.id,
  bucketId: row.bucket_id,
  path: row.path,
  contentType: row.content_type,
  bytes: row.bytes,
  currentVersionId: row.current_version_id!,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

/** Files that currently exist (deleted ones keep their row and history but have no current version). */
export function currentFiles(db: Deps['db']) {
  return db('files')
    .join('file_versions', 'file_versions.id', 'files.current_version_id')
    .select(
      'files.*',
      'file_versions.bytes',
      'file_versions.content_type',
      'file_versions.blob_sha256',
      'file_versions.created_at as version_created_at',
    );
}

/** The current version of the file at `path`, or null when there is none. */
export async function findCurrentFile(
  deps: Pick<Deps, 'hotSql'>,
  bucketId: string,
  path: string,
): Promise<StoredFile | null> {
  const row = await deps.hotSql.get<CurrentFileRow>(
    `SELECT files.id, files.bucket_id, files.path, files.current_version_id, files.created_at, files.updated_at, file_versions.bytes, file_versions.content_type, file_versions.blob_sha256, file_versions.created_at AS version_created_at
     FROM files JOIN file_versions ON file_versions.id = files.current_version_id WHERE files.bucket_id = ? AND files.path = ?`,
    bucketId,
    path,
  );
  return row ? { file: toFile(row), sha256: row.blob_sha256 } : null;
}
