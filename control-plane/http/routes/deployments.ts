import { z } from 'zod';
import * as deployments from '../../operations/deployments.ts';
import * as deploymentService from '../../deployments/deployments.ts';
import { Uuid } from '../../schemas.ts';
import { BerthError } from '../../errors.ts';
import { type AnyRoute, defineRoute, readingRawBody } from '../route.ts';

const failed = {
  422: {
    description:
      'a function or cron source failed to compile, or the account’s storage limit was reached: the deployment is FAILED, the site unchanged (code "deployment_failed"; details.errors lists each file’s)',
  },
};

export const deploymentRoutes: AnyRoute[] = [
  {
    operation: deployments.listDeployments,
    method: 'GET',
    path: '/v0/sites/:siteId/deployments',
    operationId: 'listDeployments',
    tag: 'Deployments',
    ok: 'a page of the site’s deployments, newest first',
  },
  {
    operation: deployments.createDeployment,
    method: 'POST',
    path: '/v0/sites/:siteId/deployments',
    operationId: 'createDeployment',
    tag: 'Deployments',
    status: 201,
    // 20,000 declared files, each with its path, digest and type.
    maxJsonBytes: 16 * 1024 * 1024,
    ok: 'the deployment, UPLOADING, with the digests still to upload',
    errors: { 409: { description: 'the site has 5 deployments uploading already (code "too_many_open_deployments")' } },
  },
  {
    operation: deployments.getDeployment,
    method: 'GET',
    path: '/v0/sites/:siteId/deployments/:deploymentId',
    operationId: 'getDeployment',
    tag: 'Deployments',
    ok: 'the deployment, its files and its diff',
  },
  defineRoute({
    method: 'PUT',
    path: '/v0/sites/:siteId/deployments/:deploymentId/files/:sha256',
    operationId: 'uploadDeploymentFile',
    summary: 'Upload the bytes of one digest the deployment declared',
    tag: 'Deployments',
    params: z.object({ siteId: Uuid, deploymentId: Uuid, sha256: z.string() }),
    rawBody: { contentType: '*/*', description: 'the bytes: checked against the digest and the size declared' },
    responses: {
      200: {
        description: 'stored',
        schema: z.object({ uploaded: z.object({ sha256: z.string(), bytes: z.number() }) }),
      },
      400: { description: 'the bytes are not the ones declared (code "digest_mismatch")' },
      409: { description: 'the deployment takes no more uploads (code "deployment_not_open")' },
      413: { description: 'the account’s storage limit (code "quota_exceeded")' },
    },
    handler: async ({ deps, actor, params, ctx }) => {
      if (ctx.querystring !== '') throw new BerthError('query_not_allowed', 'uploads take no query parameters');
      return readingRawBody(ctx, () =>
        deploymentService.uploadDeploymentFile(deps, actor, params.siteId, params.deploymentId, params.sha256, ctx.req),
      );
    },
  }),
  {
    operation: deployments.publishDeployment,
    method: 'POST',
    path: '/v0/sites/:siteId/deployments/:deploymentId/publish',
    operationId: 'publishDeployment',
    tag: 'Deployments',
    ok: 'the deployment, PUBLISHED',
    errors: {
      409: {
        description:
          'bytes still to upload (code "deployment_incomplete", details.missing), or the deployment is not UPLOADING ("deployment_not_open")',
      },
      ...failed,
    },
  },
  {
    operation: deployments.cancelDeployment,
    method: 'DELETE',
    path: '/v0/sites/:siteId/deployments/:deploymentId',
    operationId: 'cancelDeployment',
    tag: 'Deployments',
    ok: 'the deployment, FAILED as cancelled',
    errors: { 409: { description: 'it is not UPLOADING (code "deployment_not_open")' } },
  },
  {
    operation: deployments.updateDeployment,
    method: 'POST',
    path: '/v0/sites/:siteId/deployments/:deploymentId',
    operationId: 'updateDeployment',
    tag: 'Deployments',
    ok: 'the deployment, with who its preview answers and whether its functions get the site’s secrets',
  },
  {
    operation: deployments.promoteDeployment,
    method: 'POST',
    path: '/v0/sites/:siteId/deployments/:deploymentId/promote',
    operationId: 'promoteDeployment',
    tag: 'Deployments',
    ok: 'the new PROMOTE deployment, PUBLISHED',
    errors: { 409: { description: 'files of that state lost their bytes (code "versions_unavailable")' }, ...failed },
  },
  {
    operation: deployments.restoreSite,
    method: 'POST',
    path: '/v0/sites/:siteId/restore',
    operationId: 'restoreSite',
    tag: 'Deployments',
    ok: 'the new RESTORE deployment, PUBLISHED',
    errors: {
      409: { description: 'files of that instant lost their bytes (code "versions_unavailable")' },
      422: { description: 'before the site’s history begins (code "before_history", details.availableFrom)' },
    },
  },
  {
    operation: deployments.getSiteSnapshot,
    method: 'GET',
    path: '/v0/sites/:siteId/snapshot',
    operationId: 'getSiteSnapshot',
    tag: 'Deployments',
    ok: 'the site’s files at that instant',
  },
];
