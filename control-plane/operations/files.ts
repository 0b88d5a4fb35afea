// Versioned files in buckets. REST moves raw bytes of any size with routes of its own
// (http/routes/files.ts); read_file, read_file_version and write_file are the text forms of the same
// services, for front doors that carry JSON only (MCP).
import { Readable } from 'node:stream';
import { z } from 'zod';
import { BerthError } from '../errors.ts';
import * as files from '../services/files.ts';
import {
  BucketParams,
  FileRecord,
  FileVersionsPage,
  ListFilesQuery,
  PageQuery,
  Pagination,
  RestoreBody,
  Uuid,
  WriteFileResult,
  VersionDeletion,
} from '../schemas.ts';
import type { Deps } from '../deps.ts';
import { defineOperation, withParams } from './operation.ts';

/** The spec's limit for file contents carried as text. */
export const MAX_TEXT_FILE_BYTES = 256 * 1024;

const FilePath = z
  .string({ error: 'a file path is required' })
  .min(1, { error: 'a file path is required' })
  .describe('file path in the bucket, e.g. web/index.html');
export const ObjectParams = z.object({ bucketId: Uuid, path: FilePath });
const FileParams = z.object({ fileId: Uuid });
export const VersionParams = z.object({ fileId: Uuid, versionId: Uuid });
const TextContent = z.object({
  content: z.string(),
  contentType: z.string(),
  bytes: z.number().int(),
  versionId: Uuid,
});

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The bytes of a blob as text, if they are text and small enough to carry as such. */
async function textOf(deps: Deps, sha256: string, bytes: number, path: string): Promise<string> {
  if (bytes > MAX_TEXT_FILE_BYTES) {
    throw new BerthError(
      'file_too_large_for_text',
      `${path} has ${bytes} bytes; text reads carry at most ${MAX_TEXT_FILE_BYTES}: read it through GET /v0/buckets/:bucketId/objects/${path}`,
    );
  }
  const data = await deps.blobs.read(sha256);
  try {
    const text = utf8.decode(data);
    if (!text.includes('\u0000')) return text;
  } catch {
    // Not UTF-8: binary.
  }
  throw new BerthError(
    'file_not_text',
    `${path} is not UTF-8 text; read its bytes through GET /v0/buckets/:bucketId/objects/${path}`,
  );
}

export const listFiles = defineOperation({
  name: 'list_files',
  description: 'List files, by exact path or prefix, in path order',
  permission: 'READ',
  input: BucketParams.extend(ListFilesQuery.shape),
  output: z.object({ files: z.array(FileRecord), pagination: Pagination }),
  run: (deps, actor, { bucketId, ...query }) => files.listFiles(deps, actor, bucketId, query, query),
});

export const readFile = defineOperation({
  name: 'read_file',
  description: `Read a text file’s current content (UTF-8, up to ${MAX_TEXT_FILE_BYTES / 1024} KiB)`,
  permission: 'READ',
  input: ObjectParams,
  output: TextContent.extend({ fileId: Uuid, path: z.string() }),
  run: async (deps, actor, input) => {
    const { file, sha256 } = await files.statFile(deps, actor, input.bucketId, input.path);
    const content = await textOf(deps, sha256, file.bytes, file.path);
    return {
      fileId: file.id,
      path: file.path,
      content,
      contentType: file.contentType,
      bytes: file.bytes,
      versionId: file.currentVersionId,
    };
  },
});

export const writeFile = defineOperation({
  name: 'write_file',
  description:
    'Write a text file as a new version; api/ and cron/ sources are deployed and the result says how that went',
  permission: 'WRITE',
  input: ObjectParams.extend({
    content: z.string({ error: 'content must be a string' }),
    contentType: z.string().optional().describe('stored and served as given (default text/plain; charset=utf-8)'),
    ifMatch: Uuid.optional().describe('write only if this version id is still the current one'),
  }).strict(),
  output: WriteFileResult,
  run: (deps, actor, input) =>
    files.writeFile(deps, actor, input.bucketId, input.path, {
      body: Readable.from([Buffer.from(input.content, 'utf8')]),
      contentType: input.contentType ?? 'text/plain; charset=utf-8',
      ifMatch: input.ifMatch,
    }),
});

export const deleteFile = defineOperation({
  name: 'delete_file',
  description: 'Delete a file (its version history is kept and restorable)',
  permission: 'WRITE',
  destructive: true,
  input: ObjectParams.strict(),
  output: z.object({ id: Uuid, bucketId: Uuid, path: z.string() }),
  run: (deps, actor, input) => files.deleteFile(deps, actor, input.bucketId, input.path),
});

export const listFileVersions = defineOperation({
  name: 'list_file_versions',
  description: 'List a file’s versions, newest first',
  permission: 'READ',
  input: FileParams.extend(PageQuery.shape),
  output: FileVersionsPage,
  run: (deps, actor, { fileId, ...page }) => files.listVersions(deps, actor, fileId, page),
});

export const readFileVersion = defineOperation({
  name: 'read_file_version',
  description: `Read the exact content of a version of a text file (UTF-8, up to ${MAX_TEXT_FILE_BYTES / 1024} KiB)`,
  permission: 'READ',
  input: VersionParams,
  output: TextContent.extend({ fileId: Uuid }),
  run: async (deps, actor, input) => {
    const { version, sha256 } = await files.getVersion(deps, actor, input.fileId, input.versionId);
    const content = await textOf(deps, sha256, version.bytes, `version ${version.id}`);
    return {
      fileId: input.fileId,
      content,
      contentType: version.contentType,
      bytes: version.bytes,
      versionId: version.id,
    };
  },
});

export const restoreFileVersion = defineOperation({
  name: 'restore_file_version',
  description: 'Make an old version current again, as a new version',
  permission: 'WRITE',
  input: withParams(FileParams, RestoreBody),
  output: z.object({ fileId: Uuid, versionId: Uuid, restoredFromVersionId: Uuid, path: z.string() }),
  run: (deps, actor, { fileId, ...restore }) => files.restoreFile(deps, actor, fileId, restore),
});

export const deleteFileVersion = defineOperation({
  name: 'delete_file_version',
  description:
    'Delete one old version of a file for good, freeing its bytes unless another version holds the same content; deployments of the site that held it lose the file (their previews, promotes and restores with them)',
  permission: 'WRITE',
  destructive: true,
  input: VersionParams.strict(),
  output: VersionDeletion,
  run: (deps, actor, input) => files.deleteVersion(deps, actor, input.fileId, input.versionId),
});

export const pruneFileVersions = defineOperation({
  name: 'prune_file_versions',
  description:
    'Delete every version of a file but its current one (all of a deleted file’s) and those functions are served from',
  permission: 'WRITE',
  destructive: true,
  input: FileParams.strict(),
  output: z.object({ fileId: Uuid, deletedVersions: z.number().int(), freedBytes: z.number().int() }),
  run: (deps, actor, input) => files.pruneVersions(deps, actor, input.fileId),
});
