import type Koa from 'koa';
import { z } from 'zod';
import { BerthError } from '../../errors.ts';
import type { Deps } from '../../services/deps.ts';
import * as files from '../../services/files.ts';
import { BucketParams, FileRecord, FileVersion, ListFilesQuery, PageQuery, Pagination, RestoreBody, Uuid, WriteFileResult } from '../../schemas.ts';
import { defineRoute } from '../route.ts';

const ObjectParams = z.object({
  bucketId: Uuid,
  path: z.string({ error: 'a file path is required after /objects/' }).describe('file path in the bucket, e.g. web/index.html'),
});
const FileParams = z.object({ fileId: Uuid });
const VersionParams = z.object({ fileId: Uuid, versionId: Uuid });

/** Sends stored bytes with the headers every file read carries; HEAD sends the headers alone. */
function sendBytes(ctx: Koa.Context, deps: Deps, sha256: string, meta: { bytes: number; contentType: string; fileId: string; versionId: string }) {
  ctx.status = 200;
  if (ctx.method !== 'HEAD') ctx.body = deps.blobs.stream(sha256);
  ctx.set({
    'Content-Type': meta.contentType,
    'Content-Length': String(meta.bytes),
    'Cache-Control': 'private, no-store',
    'Berth-File-Id': meta.fileId,
    'Berth-Version-Id': meta.versionId,
    ETag: `"${meta.versionId}"`,
    'X-Content-Type-Options': 'nosniff',
  });
}

/** If-Match carries a version id, bare or as a quoted entity tag. */
function ifMatchVersion(ctx: Koa.Context): string | undefined {
  const raw = ctx.get('If-Match').trim();
  if (!raw) return undefined;
  const version = raw.replace(/^W\//, '').replace(/^"(.*)"$/, '$1');
  if (!Uuid.safeParse(version).success) {
    throw new BerthError('invalid_request', 400, 'If-Match must be the current version id of the file');
  }
  return version;
}

export const fileRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v0/buckets/:bucketId/objects',
    operationId: 'listFiles',
    summary: 'List files, by exact path or prefix, in path order',
    tag: 'Files',
    params: BucketParams,
    query: ListFilesQuery,
    responses: { 200: { description: 'a page of files', schema: z.object({ files: z.array(FileRecord), pagination: Pagination }) } },
    handler: ({ deps, actor, params, query }) => files.listFiles(deps, actor, params.bucketId, query, query),
  }),
  defineRoute({
    method: 'GET',
    path: '/v0/buckets/:bucketId/objects/{*path}',
    operationId: 'readFile',
    summary: 'Read a file’s current bytes (HEAD: its headers only)',
    tag: 'Files',
    params: ObjectParams,
    responses: { 200: { description: 'the raw bytes with the stored Content-Type, Berth-File-Id and Berth-Version-Id', contentType: '*/*' } },
    handler: async ({ deps, actor, params, ctx }) => {
      const { file, sha256 } = await files.statFile(deps, actor, params.bucketId, params.path);
      sendBytes(ctx, deps, sha256, { bytes: file.bytes, contentType: file.contentType, fileId: file.id, versionId: file.currentVersionId });
    },
  }),
  defineRoute({
    method: 'PUT',
    path: '/v0/buckets/:bucketId/objects/{*path}',
    operationId: 'writeFile',
    summary: 'Write a file: a new version whose bytes are the request body',
    tag: 'Files',
    params: ObjectParams,
    rawBody: { contentType: '*/*', description: 'the file’s bytes; Content-Type is stored (default application/octet-stream)' },
    headers: { 'If-Match': 'write only if this version id is still the current one (409 otherwise)' },
    responses: {
      200: { description: 'the new version', schema: WriteFileResult },
      409: { description: 'If-Match is not the current version (code "version_conflict")' },
      413: { description: 'the body exceeds the configured maximum file size (code "file_too_large")' },
    },
    handler: async ({ deps, actor, params, ctx }) => {
      if (ctx.querystring !== '') {
        throw new BerthError('query_not_allowed', 400, 'file writes take no query parameters; put the whole path in the URL');
      }
      const declared = ctx.get('Content-Length');
      try {
        return await files.writeFile(deps, actor, params.bucketId, params.path, {
          body: ctx.req,
          contentType: ctx.get('Content-Type') || undefined,
          ifMatch: ifMatchVersion(ctx),
          declaredBytes: declared ? Number(declared) : undefined,
        });
      } catch (err) {
        // The rest of a refused body is not read: close the connection rather than reuse it.
        if (!ctx.req.readableEnded) ctx.set('Connection', 'close');
        throw err;
      }
    },
  }),
  defineRoute({
    method: 'DELETE',
    path: '/v0/buckets/:bucketId/objects/{*path}',
    operationId: 'deleteFile',
    summary: 'Delete a file (its version history is kept and restorable)',
    tag: 'Files',
    params: ObjectParams,
    responses: { 200: { description: 'the deleted file', schema: z.object({ id: Uuid, bucketId: Uuid, path: z.string() }) } },
    handler: ({ deps, actor, params }) => files.deleteFile(deps, actor, params.bucketId, params.path),
  }),
  defineRoute({
    method: 'GET',
    path: '/v0/files/:fileId/versions',
    operationId: 'listFileVersions',
    summary: 'List a file’s versions, newest first',
    tag: 'Files',
    params: FileParams,
    query: PageQuery,
    responses: {
      200: {
        description: 'a page of versions',
        schema: z.object({ fileId: Uuid, currentVersionId: Uuid.nullable(), versions: z.array(FileVersion), pagination: Pagination }),
      },
    },
    handler: ({ deps, actor, params, query }) => files.listVersions(deps, actor, params.fileId, query),
  }),
  defineRoute({
    method: 'GET',
    path: '/v0/files/:fileId/versions/:versionId/content',
    operationId: 'readFileVersion',
    summary: 'Read the exact bytes of a version',
    tag: 'Files',
    params: VersionParams,
    responses: { 200: { description: 'the version’s raw bytes', contentType: '*/*' } },
    handler: async ({ deps, actor, params, ctx }) => {
      const { version, sha256 } = await files.getVersion(deps, actor, params.fileId, params.versionId);
      sendBytes(ctx, deps, sha256, { bytes: version.bytes, contentType: version.contentType, fileId: params.fileId, versionId: version.id });
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/v0/files/:fileId/restore',
    operationId: 'restoreFileVersion',
    summary: 'Make an old version current again, as a new version',
    tag: 'Files',
    params: FileParams,
    body: RestoreBody,
    responses: {
      200: {
        description: 'the new version',
        schema: z.object({ fileId: Uuid, versionId: Uuid, restoredFromVersionId: Uuid, path: z.string() }),
      },
      409: { description: 'currentVersionId is not the current version (code "version_conflict")' },
    },
    handler: ({ deps, actor, params, body }) => files.restoreFile(deps, actor, params.fileId, body),
  }),
];
