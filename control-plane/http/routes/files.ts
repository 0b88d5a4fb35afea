import type Koa from 'koa';
import { BerthError } from '../../errors.ts';
import type { Deps } from '../../deps.ts';
import * as files from '../../operations/files.ts';
import * as fileService from '../../services/files.ts';
import { Uuid, WriteFileResult } from '../../schemas.ts';
import { type AnyRoute, defineRoute, readingRawBody } from '../route.ts';

const { ObjectParams, VersionParams } = files;

/** Sends stored bytes with the headers every file read carries; HEAD sends the headers alone. */
async function sendBytes(
  ctx: Koa.Context,
  deps: Deps,
  sha256: string,
  meta: { bytes: number; contentType: string; fileId: string; versionId: string },
): Promise<void> {
  ctx.status = 200;
  if (ctx.method !== 'HEAD') ctx.body = await deps.blobs.stream(sha256);
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
    throw new BerthError('invalid_request', 'If-Match must be the current version id of the file');
  }
  return version;
}

export const fileRoutes: AnyRoute[] = [
  {
    operation: files.listFiles,
    method: 'GET',
    path: '/v0/buckets/:bucketId/objects',
    operationId: 'listFiles',
    tag: 'Files',
    ok: 'a page of files',
  },
  defineRoute({
    method: 'GET',
    path: '/v0/buckets/:bucketId/objects/{*path}',
    operationId: 'readFile',
    summary: 'Read a file’s current bytes (HEAD: its headers only)',
    tag: 'Files',
    params: ObjectParams,
    responses: {
      200: {
        description: 'the raw bytes with the stored Content-Type, Berth-File-Id and Berth-Version-Id',
        contentType: '*/*',
      },
    },
    handler: async ({ deps, actor, params, ctx }) => {
      const { file, sha256 } = await fileService.statFile(deps, actor, params.bucketId, params.path);
      await sendBytes(ctx, deps, sha256, {
        bytes: file.bytes,
        contentType: file.contentType,
        fileId: file.id,
        versionId: file.currentVersionId,
      });
    },
  }),
  defineRoute({
    method: 'PUT',
    path: '/v0/buckets/:bucketId/objects/{*path}',
    operationId: 'writeFile',
    summary: 'Write a file: a new version whose bytes are the request body',
    tag: 'Files',
    params: ObjectParams,
    rawBody: {
      contentType: '*/*',
      description: 'the file’s bytes; Content-Type is stored (default application/octet-stream)',
    },
    headers: { 'If-Match': 'write only if this version id is still the current one (409 otherwise)' },
    responses: {
      200: { description: 'the new version', schema: WriteFileResult },
      409: { description: 'If-Match is not the current version (code "version_conflict")' },
      413: {
        description:
          'the body exceeds the configured maximum file size (code "file_too_large"), or the account’s storage limit (code "quota_exceeded")',
      },
    },
    handler: async ({ deps, actor, params, ctx }) => {
      if (ctx.querystring !== '') {
        throw new BerthError(
          'query_not_allowed',
          'file writes take no query parameters; put the whole path in the URL',
        );
      }
      const declared = ctx.get('Content-Length');
      return readingRawBody(ctx, () =>
        fileService.writeFile(deps, actor, params.bucketId, params.path, {
          body: ctx.req,
          contentType: ctx.get('Content-Type') || undefined,
          ifMatch: ifMatchVersion(ctx),
          declaredBytes: declared ? Number(declared) : undefined,
        }),
      );
    },
  }),
  {
    operation: files.deleteFile,
    method: 'DELETE',
    path: '/v0/buckets/:bucketId/objects/{*path}',
    operationId: 'deleteFile',
    tag: 'Files',
    ok: 'the deleted file',
  },
  {
    operation: files.listFileVersions,
    method: 'GET',
    path: '/v0/files/:fileId/versions',
    operationId: 'listFileVersions',
    tag: 'Files',
    ok: 'a page of versions',
  },
  defineRoute({
    method: 'GET',
    path: '/v0/files/:fileId/versions/:versionId/content',
    operationId: 'readFileVersion',
    summary: 'Read the exact bytes of a version',
    tag: 'Files',
    params: VersionParams,
    responses: { 200: { description: 'the version’s raw bytes', contentType: '*/*' } },
    handler: async ({ deps, actor, params, ctx }) => {
      const { version, sha256 } = await fileService.getVersion(deps, actor, params.fileId, params.versionId);
      await sendBytes(ctx, deps, sha256, {
        bytes: version.bytes,
        contentType: version.contentType,
        fileId: params.fileId,
        versionId: version.id,
      });
    },
  }),
  {
    operation: files.deleteFileVersion,
    method: 'DELETE',
    path: '/v0/files/:fileId/versions/:versionId',
    operationId: 'deleteFileVersion',
    tag: 'Files',
    ok: 'the deleted version and the bytes it freed',
    errors: {
      409: {
        description:
          'the version is current, a function is served from it, or it is a file of one of the site’s kept deployments (code "version_in_use")',
      },
    },
  },
  {
    operation: files.pruneFileVersions,
    method: 'DELETE',
    path: '/v0/files/:fileId/versions',
    operationId: 'pruneFileVersions',
    tag: 'Files',
    ok: 'how many versions went and the bytes they freed',
  },
  {
    operation: files.restoreFileVersion,
    method: 'POST',
    path: '/v0/files/:fileId/restore',
    operationId: 'restoreFileVersion',
    tag: 'Files',
    ok: 'the new version',
    errors: { 409: { description: 'currentVersionId is not the current version (code "version_conflict")' } },
  },
];
